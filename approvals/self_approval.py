"""Separation of duties: the person who asked for something may not be the one who signs it off.

``hitlConfig.allowSelfApproval`` (and ``allowSelfApproval`` on a tool rule) decides, when a pause
opens, whether the people it concerns may also decide it. The value is frozen on the pause, and every
surface (REST, admin page, admin bulk) asks ``refuse_self_approval`` before the compare-and-set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from approvals.actors import Actor
from approvals.models import Pause
from common.errors import Forbidden

FIELD = "allowSelfApproval"
SELF_APPROVAL_DETAIL = (
    "Self-approval is not allowed for this agent: the user whose request raised the pause may cancel it "
    "but not approve or reject it"
)


def effective_allow_self_approval(hitl_config: Any, rules: Iterable[Any] = ()) -> bool:
    """Whether the people a pause concerns may decide it themselves: the strictest statement wins.

    The agent level is ``hitlConfig.allowSelfApproval``, else the setting ``HITL_ALLOW_SELF_APPROVAL``
    (default true, as in EDDI). For a tool-call pause, ``rules`` are the tool rules that
    matched its gated calls: a rule can only forbid, so if the agent level or any matched rule says
    false, self-approval is refused. Documents are validated on save; a stated value that is not a
    boolean (stored data older than the rule) counts as false, so it fails closed.
    """
    agent_level = hitl_config.get(FIELD) if isinstance(hitl_config, dict) else None
    if agent_level is None:
        agent_level = bool(settings.HITL_ALLOW_SELF_APPROVAL)
    stated = [agent_level, *(rule.get(FIELD) for rule in rules if isinstance(rule, dict))]
    return all(value is True for value in stated if value is not None)


def is_self_approval(pause: Pause, user_id: int | None) -> bool:
    """``user_id`` is one of the people this pause concerns and its frozen rule forbids them to decide it.

    Those people are the conversation's owner and the user whose turn raised the pause. The rule is
    about the person, not the role: an admin who owns the conversation is refused like anyone else.
    """
    if pause.allow_self_approval or user_id is None:
        return False
    return user_id in (pause.owner_id, pause.raised_by_id)


def refuse_self_approval(*, pause: Pause, actor: Actor) -> None:
    """Refuse (403) a human approval or rejection of a pause that forbids self-approval for this actor.

    Cancelling is never refused here (the asker may always withdraw the request), nor are system actors
    (timers, guards): they are nobody's own request. Called before any write, so nothing is consumed
    and nothing is audited: a refused attempt changes nothing.
    """
    if actor.automated:
        return
    if is_self_approval(pause, actor.user_id):
        raise Forbidden(SELF_APPROVAL_DETAIL)
