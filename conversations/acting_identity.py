"""Whose identity a continuation's calls carry (``${caller:token}``, a nested conversation's owner).

An approver's credentials never reach a call the approver did not see: the continuation of a decided
pause acts for the user whose turn raised it, and only the calls of a tool batch a human approved act
as that approver.
"""

from __future__ import annotations

from approvals.models import Pause, PauseKind
from conversations.pipeline.conversation_memory import Caller
from conversations.step_store import caller_for


def continuation_caller(pause: Pause) -> Caller | None:
    """The rest of a paused turn acts for the user whose turn raised the pause (``Pause.raised_by``; no
    caller when it is null), exactly as if the turn had not paused: its ungated tool calls, the previews
    of new gated calls, the http calls rules fire after a RULE pause and the nested conversations its
    tools start. Never the decider's: they saw none of these calls."""
    if pause.raised_by_id is not None and pause.raised_by_id == pause.owner_id:
        return caller_for(pause.owner)  # the usual case, and the decision read the owner with the pause
    return caller_for(pause.raised_by)


def approver_caller(pause: Pause) -> Caller | None:
    """The identity the approved calls of a decided tool batch run as: the human approver with an
    account here, who saw each request (host, path and headers are in its preview) and approved it.

    None, and those calls act for the raising user like the rest of the turn, when the decision was
    automated (a ``system:*`` decider such as an AUTO_APPROVE timeout has no approver), when the decider
    has no account here (a Slack reviewer), and for any pause that is not a tool pause. A rejected call
    runs nothing, so only approved calls ever carry it."""
    if pause.kind != PauseKind.TOOL_CALL or pause.automated:
        return None
    return caller_for(pause.decided_by_user)
