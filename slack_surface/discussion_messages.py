"""What a discussion's Slack thread and the approval channel are told (docs/slack.md, "Group discussions").

Notices carry what a reviewer needs and nothing a member said in confidence: the pause reason and the
ids of the tasks awaiting approval, the verdict and who gave it, and at the end the last synthesis
entry's content (the discussion's answer), cut to ``ANSWER_MAX`` characters. The approval card adds the
awaiting tasks' descriptions (cut, at most five, then "+N more"); never a transcript, a task result or
a member's tool arguments.
"""

from __future__ import annotations

from typing import Any

from approvals.models import Pause, Verdict
from groups.discussion_decisions import group_pause_details
from groups.models import DiscussionState, GroupConversation
from slack_surface.messages import (
    CALLS_MAX,
    decider_text,
    decision_blocks,
    escaped,
    mention,
    timeout_text,
)

CARD_TITLE = "⏸️ Group discussion awaiting approval"
STARTED = "🗣️ Discussion started on group *{group}* — I will post its progress in this thread."
STILL_RUNNING = "⏳ The discussion is still running — its answer will be posted in this thread."
ANSWER_MAX = 2000
DESCRIPTION_MAX = 300


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def pause_notice(pause: Pause) -> str:
    """⏸️ with the reason and the awaiting task ids only."""
    text = f"⏸️ The discussion is awaiting human approval.\n> {escaped(pause.reason)}"
    awaiting = (pause.details or {}).get("awaitingTaskIds") or []
    if awaiting:
        text += "\nAwaiting approval: " + ", ".join(f"`{escaped(str(t))}`" for t in awaiting)
    return text


def decision_notice(pause: Pause) -> str:
    by = decider_text(pause)
    if pause.verdict == Verdict.APPROVED:
        return f"✅ Approved by {by} — the discussion continues."
    if pause.verdict == Verdict.REJECTED:
        note = f": {escaped(pause.note)}" if pause.note else ""
        return f"⛔ Rejected by {by}{note}"
    return cancel_notice(by)


def cancel_notice(by: str) -> str:
    return f"⛔ The discussion was cancelled{f' by {by}' if by else ''}."


def cancelled_by(name: str | None) -> str:
    name = name or ""
    return mention(name.removeprefix("slack:")) if name.startswith("slack:") else escaped(name)


def skipped_notice(member_name: str, note: str) -> str:
    text = f"⏭️ {escaped(member_name)} asked for a human approval inside its turn; the turn was skipped."
    return f"{text}\n> {escaped(_cut(note, DESCRIPTION_MAX))}" if note else text


def last_synthesis(discussion: GroupConversation) -> str:
    for entry in reversed(discussion.transcript or []):
        if entry.get("phaseType") == "SYNTHESIS" and entry.get("member") and entry.get("content"):
            return str(entry["content"])
    return ""


def end_notice(discussion: GroupConversation, *, message: str = "") -> str:
    """COMPLETED or FAILED, with the last synthesis entry's content cut to ``ANSWER_MAX``."""
    answer = last_synthesis(discussion)
    if discussion.state == DiscussionState.COMPLETED:
        head = "✅ The discussion completed."
    else:
        head = "⚠️ The discussion failed." + (
            f"\n> {escaped(_cut(message, DESCRIPTION_MAX))}" if message else ""
        )
    return f"{head}\n{escaped(_cut(answer, ANSWER_MAX))}" if answer else head


def _task_blocks(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks = [
        {
            "type": "context",
            "elements": [
                {
                    "type": "plain_text",
                    "emoji": False,
                    "text": f"{task['id']} — {_cut(str(task['description']), DESCRIPTION_MAX)}",
                }
            ],
        }
        for task in tasks[:CALLS_MAX]
    ]
    if len(tasks) > CALLS_MAX:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "plain_text", "text": f"+{len(tasks) - CALLS_MAX} more"}],
            }
        )
    return blocks


def group_approval_card(
    pause: Pause, *, integration_name: str, group_name: str, buttons: bool
) -> list[dict[str, Any]]:
    """Discussion, group, phase, reason, deadline, the awaiting tasks; buttons name ``group:<id>``."""
    details = group_pause_details(pause)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": CARD_TITLE}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Discussion*\n`{pause.subject_id}`"},
                {"type": "mrkdwn", "text": f"*Group*\n{escaped(group_name)}"},
                {
                    "type": "mrkdwn",
                    "text": f"*Phase*\n{escaped(str(details['phaseName']))} ({details['type']})",
                },
                {"type": "mrkdwn", "text": f"*Reason*\n{escaped(pause.reason)}"},
                {"type": "mrkdwn", "text": f"*Timeout*\n{escaped(timeout_text(pause))}"},
            ],
        },
    ]
    blocks.extend(_task_blocks(details["awaitingTasks"]))
    return blocks + decision_blocks(
        pause, integration_name=integration_name, subject=f"group:{pause.subject_id}", buttons=buttons
    )
