"""What Slack is told: the exact texts of EDDI and the approval card.

The in-thread notice carries the pause reason only. The approval card, posted to the approval channel
for reviewers, adds for a TOOL_CALL pause one context block per pending call: its tool name, for an http
tool the request line it will send (method and whole URL, query included, redacted and cut to 500
characters), and its arguments as the redacted views show them (toolgate.gate.pause_details: never a
value of a credential's shape), cut to 300 characters, at most five calls and then "+N more"; the admin
decision page shows all of it. Without approver ids there are
no buttons (fail closed). Text from agents and tools goes out as plain text or escaped mrkdwn, so it
cannot mention @channel or forge a link.
"""

from __future__ import annotations

from typing import Any

from approvals.models import Pause, PauseKind, TimeoutPolicy, Verdict
from approvals.votes import Tally
from toolgate.gate import tool_pause_details

APPROVE, REJECT = "hitl_approve", "hitl_reject"
CARD_TITLE = "⏸️ Conversation awaiting approval"
AWAITING = "⏸️ This conversation is awaiting human approval."
STILL_AWAITING = "⏸️ Still awaiting approval — a reviewer must decide before I can continue."
STILL_WORKING = "⏳ I am still working on your previous message — please wait for its answer."
NO_APPROVERS = "No approver user ids configured — approve or reject via the API."
ALREADY_RESOLVED = "☑️ This request has already been resolved."
ARGUMENTS_MAX = 300
REQUEST_LINE_MAX = 500
CALLS_MAX = 5


def escaped(text: str) -> str:
    """Slack's mrkdwn escaping: only &, < and > are control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(slack_user: str) -> str:
    return f"<@{slack_user}>"


def decider_text(pause: Pause) -> str:
    """``<@U>`` for a Slack user, ``(system:timeout)`` for an automated decider, else the username."""
    name = pause.decided_by or ""
    if name.startswith("slack:"):
        return mention(name.removeprefix("slack:"))
    if pause.automated:
        return f"({name})"
    return escaped(name)


VOTES_BLOCK = "hitl-votes"


def voter_text(voter: str) -> str:
    """A voter as Slack shows them: a Slack user mentioned, anyone else by name."""
    return mention(voter.removeprefix("slack:")) if voter.startswith("slack:") else escaped(voter)


def votes_block(tally: Tally | None, required: int) -> dict[str, Any]:
    """The card's line of approvals: how many are needed, who approved, how many are missing."""
    if tally is None or not tally.votes:
        text = f"Needs {required} approvals from different people."
    else:
        who = ", ".join(voter_text(voter) for voter, _ in tally.votes)
        text = f"✅ {tally.count} of {tally.required} approvals: {who}. {tally.missing} more needed."
    return {"type": "context", "block_id": VOTES_BLOCK, "elements": [{"type": "mrkdwn", "text": text}]}


def with_votes(blocks: tuple[dict[str, Any], ...], tally: Tally) -> list[dict[str, Any]]:
    """The card as it was, its line of approvals replaced (or put before its buttons)."""
    kept = [block for block in blocks if block.get("block_id") != VOTES_BLOCK]
    at = next((i for i, block in enumerate(kept) if block.get("type") == "actions"), len(kept))
    return [*kept[:at], votes_block(tally, tally.required), *kept[at:]]


def vote_recorded(slack_user: str, tally: Tally) -> str:
    """The thread's notice of one approval among several: who approved, the count, how many are missing."""
    more = f"{tally.missing} more approval{'s' if tally.missing != 1 else ''} needed from someone else"
    return f"✅ {mention(slack_user)} approved: {escaped(tally.text())}. {more}."


def thread_notice(output: list[str], reason: str) -> str:
    """The turn's output so far, then the pause notice with the reason only."""
    said = "\n".join(line for line in output if line)
    notice = f"{AWAITING}\n> {escaped(reason)}"
    return f"{escaped(said)}\n\n{notice}" if said else notice


def continuation_text(pause: Pause, *, state: str, output: list[str]) -> str:
    """The verdict and what the continued turn said, for the conversation's thread."""
    by = decider_text(pause)
    said = escaped("\n".join(line for line in output if line))
    if pause.verdict == Verdict.CANCELLED or not pause.verdict:
        return (
            f"⛔ The pending approval was cancelled or expired ({by}) — the paused action was not performed."
        )
    if state == "ERROR":
        return (
            f"⚠️ Approval processed by {by} — but the continuation failed. "
            "Please check the agent configuration or logs."
        )
    if pause.verdict == Verdict.APPROVED:
        head = f"✅ Approved by {by} — continuing."
    else:
        head = f"⛔ Approval rejected by {by} — the paused action was not performed."
    return f"{head}\n{said}" if said else head


def timeout_text(pause: Pause) -> str:
    if pause.timeout_policy == TimeoutPolicy.WAIT_INDEFINITELY or not pause.due_at:
        return f"{pause.timeout_policy}"
    return f"{pause.timeout_policy} ({pause.approval_timeout}), deadline {pause.due_at.isoformat()}"


def _cut(text: str, limit: int = ARGUMENTS_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _request_line(call: dict[str, Any]) -> str:
    """``POST https://pay.example/transfers?payee=bob — `` for an http tool's call (redacted), else empty."""
    preview = call.get("requestPreview") or {}
    target = preview.get("url") or preview.get("uri")
    if not target:
        return ""
    line = f"{preview.get('method') or ''} {target}".strip()
    return f"{_cut(line, REQUEST_LINE_MAX)} — "


def tool_call_blocks(pause: Pause) -> list[dict[str, Any]]:
    """One context block per pending call (redacted arguments, cut), at most five, then "+N more"."""
    calls = tool_pause_details(pause)["calls"]
    blocks = [
        {
            "type": "context",
            "elements": [
                {
                    "type": "plain_text",
                    "emoji": False,
                    "text": f"{call['toolName']} — {_request_line(call)}{_cut(call['arguments'])}",
                }
            ],
        }
        for call in calls[:CALLS_MAX]
    ]
    if len(calls) > CALLS_MAX:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "plain_text", "text": f"+{len(calls) - CALLS_MAX} more"}],
            }
        )
    return blocks


def button_value(integration_name: str, subject: str) -> str:
    """``<integration>|<conversationId>`` or ``<integration>|group:<discussionId>``."""
    return f"{integration_name}|{subject}"


def approval_card(
    pause: Pause, *, integration_name: str, agent_name: str, subject: str, buttons: bool
) -> list[dict[str, Any]]:
    """The Block Kit card for the approval channel (``subject``: the button value's part after ``|``)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": CARD_TITLE}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Conversation*\n`{escaped(str(pause.subject_id))}`"},
                {"type": "mrkdwn", "text": f"*Agent*\n{escaped(agent_name)}"},
                {"type": "mrkdwn", "text": f"*Reason*\n{escaped(pause.reason)}"},
                {"type": "mrkdwn", "text": f"*Timeout*\n{escaped(timeout_text(pause))}"},
            ],
        },
    ]
    if pause.kind == PauseKind.TOOL_CALL:
        blocks.extend(tool_call_blocks(pause))
    if pause.required_approvals > 1:
        blocks.append(votes_block(None, pause.required_approvals))
    return blocks + decision_blocks(
        pause, integration_name=integration_name, subject=subject, buttons=buttons
    )


def decision_blocks(
    pause: Pause, *, integration_name: str, subject: str, buttons: bool
) -> list[dict[str, Any]]:
    """Approve / Reject naming ``<integration>|<subject>``, or the fail-closed note without approvers."""
    if not buttons:
        return [{"type": "context", "elements": [{"type": "mrkdwn", "text": NO_APPROVERS}]}]
    value = button_value(integration_name, subject)
    return [
        {
            "type": "actions",
            "block_id": f"hitl:{pause.id}",
            "elements": [
                {
                    "type": "button",
                    "action_id": APPROVE,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": value,
                },
                {
                    "type": "button",
                    "action_id": REJECT,
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": value,
                },
            ],
        }
    ]


def resolved_card(text: str) -> list[dict[str, Any]]:
    """What a decided card becomes: its buttons gone, the outcome in their place."""
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
