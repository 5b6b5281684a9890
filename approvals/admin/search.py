"""What the inbox's search box matches, as conditions an index serves at 100,000 pending pauses.

Every word of the search must match the pause (words narrow, as in Django's own admin search), and a
word matches when it is found in the reason, in the owner's username, in the agent's current name, or
when it is a conversation, discussion, approval request, group, agent or pause id, whole or its start of
at least 8 hex digits (the short id the list shows, "089e1c0c", with or without the "…").

Why not ``search_fields``: Django's search ORs ``reason`` with the joined ``owner__username`` in one
WHERE clause, which no index can serve, so PostgreSQL walked every pending pause (385 ms at 100,000).
Here the owners and agents that match are looked up first (two small SELECTs on the users' and agents'
tables, sent as one UNION ALL: approvals.admin.lookups) and the pauses are then found by id, so each arm of the OR has an index of its own
(``pause_pending_reason_trgm``, ``pause_pending_owner_inbox``, ``pause_pending_agent``, the id indexes)
and PostgreSQL combines them (BitmapOr). The look-ups are not subqueries of the pauses' query on purpose: as a
subquery (``= ANY(ARRAY(SELECT …))``) the planner cannot see how few pauses the ids match and walks the
``paused_at`` index instead, filtering every pending pause (tried).
"""

from __future__ import annotations

import re
import uuid

from django.db.models import Q, QuerySet
from django.utils.text import smart_split, unescape_string_literal

from approvals.admin.lookups import Found, named_like
from approvals.models import Engine, Pause, SubjectType

SHORT_ID_DIGITS = 8  # the list shows ids as their first 8 hex digits
OWNERS_MATCHED = 500  # owners a search word may match; more is a word too vague to search by
_HEX = re.compile(r"[0-9a-f]+")


def search_pauses(queryset: QuerySet[Pause], search_term: str) -> QuerySet[Pause]:
    """``queryset`` narrowed to the pauses every word of ``search_term`` matches (see the module doc).

    Words split as in Django's admin search: a quoted phrase ("over the limit") is one word."""
    words = []
    for bit in smart_split(search_term):
        if bit[:1] in ('"', "'") and len(bit) > 1 and bit[-1] == bit[0]:
            bit = unescape_string_literal(bit)
        if bit.strip():
            words.append(bit)
    # the users and agents every word names: one round trip for the whole search
    for word, named in zip(words, named_like(words, limit=OWNERS_MATCHED), strict=True):
        queryset = queryset.filter(word_matches(word, named))
    return queryset


def word_matches(word: str, named: Found) -> Q:
    matches = Q(reason__icontains=word)
    if named.owners:
        matches |= Q(owner_id__in=[pk for pk, _name in named.owners])
    if named.agents:
        matches |= Q(agent_id__in=[pk for pk, _name in named.agents])
    id_range = uuid_range(word)
    if id_range is not None:
        matches |= (
            Q(pk__range=id_range)
            # the subject type is named so the (subject_type, subject_id) indexes serve the range
            | Q(subject_type__in=SubjectType.values, subject_id__range=id_range)
            | Q(surface=Engine.GROUP, group_id__range=id_range)
            | Q(agent_id__range=id_range)
        )
    return matches


def uuid_range(word: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The ids that start with ``word`` (a whole id or its first 8+ hex digits), or None if it is not one.

    PostgreSQL orders uuids by their bytes, i.e. by their hex digits, so a prefix is a range an index
    serves, where ``id::text LIKE '089e1c0c%'`` would read every row."""
    digits = word.strip().rstrip("…").replace("-", "").lower()
    if not (SHORT_ID_DIGITS <= len(digits) <= 32) or not _HEX.fullmatch(digits):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))
