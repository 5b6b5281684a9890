"""The small look-ups of an inbox page, read in one round trip: the sidebar's owners and agents, and the
users and agents a search word names.

Each look-up stays its own SELECT (its own WHERE, ORDER BY and LIMIT), so what it finds still reaches the
pauses' query as literal ids (approvals.admin.search says why that matters to the planner); only the
round trips are shared, as parts of one ``UNION ALL``. That keeps a search page within the list's query
budget (9; tests/approvals/test_admin_inbox_queries.py). Every part yields (tag, id as text, label).
A database that cannot order and limit the parts of a compound query (SQLite, the try-it-out one) asks
them one by one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import CharField, QuerySet, Value
from django.db.models.functions import Cast
from django.http import HttpRequest

from approvals.agent_names import NAMED_LIKE_LIMIT, agent_row_querysets
from approvals.selectors import owners_with_pending_pauses, pending_agent_ids

OWNER, AGENT = "owner", "agent"


def tagged(queryset: QuerySet, tag: str, label: str) -> QuerySet:
    """``queryset``'s rows as (tag, id as text, label): the one shape every part of the union has."""
    return queryset.annotate(
        lookup_tag=Value(tag, output_field=CharField()),
        lookup_key=Cast("pk", output_field=CharField()),
        lookup_label=Cast(label, output_field=CharField()),
    ).values_list("lookup_tag", "lookup_key", "lookup_label")


def read_together(parts: list[QuerySet]) -> list[tuple[str, str, str]]:
    """The rows of every part, in one query where the database allows it."""
    if len(parts) > 1 and connection.features.supports_slicing_ordering_in_compound:
        first, *rest = parts
        return list(first.union(*rest, all=True))
    return [row for part in parts for row in part]


@dataclass
class Found:
    owners: list[tuple[int, str]] = field(default_factory=list)
    agents: list[tuple[uuid.UUID, str]] = field(default_factory=list)


def sorted_out(rows: list[tuple[str, str, str]], parts: int = 1) -> list[Found]:
    """Rows tagged "owner:2" / "agent:2" sorted into the ``Found`` of part 2."""
    found = [Found() for _ in range(parts)]
    for tag, key, label in rows:
        kind, _, index = tag.partition(":")
        into = found[int(index or 0)]
        if kind == OWNER:
            into.owners.append((int(key), label))
        else:
            into.agents.append((uuid.UUID(key), label))
    return found


def sidebar_choices(request: HttpRequest, *, limit: int) -> Found:
    """The owner and agent filters' choices, for both filters in one query (kept on the request).

    The first ``limit`` owners by username and agents by id of the pending pauses the reviewer may see;
    an agent no directory knows any more is not offered. Both walk the small table (users, agents) and
    probe the pending pauses' owner or agent index for each row."""
    cached = getattr(request, "_hitl_sidebar_choices", None)
    if cached is None:
        agent_ids = pending_agent_ids(user=request.user)
        parts = [tagged(owners_with_pending_pauses(user=request.user, limit=limit), OWNER, "username")]
        parts += [
            tagged(rows.filter(pk__in=agent_ids).order_by("pk")[:limit], AGENT, "agent_name")
            for rows in agent_row_querysets()
        ]
        (cached,) = sorted_out(read_together(parts))
        request._hitl_sidebar_choices = cached  # type: ignore[attr-defined]
    return cached


def named_like(words: list[str], *, limit: int = NAMED_LIKE_LIMIT) -> list[Found]:
    """For each word, the users whose username and the agents whose name contains it (any case), the first
    ``limit`` of each by id (a word matching more is too vague to search by): every word's look-ups in
    one query."""
    parts = []
    for index, word in enumerate(words):
        users: Any = get_user_model().objects.filter(username__icontains=word).order_by("pk")[:limit]
        parts.append(tagged(users, f"{OWNER}:{index}", "username"))
        parts += [
            tagged(
                rows.filter(agent_name__icontains=word).order_by("pk")[:limit],
                f"{AGENT}:{index}",
                "agent_name",
            )
            for rows in agent_row_querysets()
        ]
    found = sorted_out(read_together(parts), len(words)) if words else []
    for each in found:
        each.agents = each.agents[:limit]
    return found
