"""The approval card of an approval request (docs/slack.md, "Approval requests").

A card is not a decision view: it shows what everyone but a reviewer deciding sees
(approval_requests.review, ``reviewer=False``: values of a credential's shape redacted). The agent and
its service account, the action, the reason, for whom, the timeout; the action's arguments as JSON cut to
300 characters; and a pinned request as one line, its method and URL cut to 500 characters. The line
never carries a header, so never the value of a header the agent marked secret (the server never kept
one anyway); the body, the headers and the context are left to REST, MCP and the admin. Text from the
agent goes out as plain text or escaped mrkdwn, so it cannot mention @channel or forge a link.
"""

from __future__ import annotations

import json
from typing import Any

from approval_requests.review import action_pause_details
from approvals.models import Pause
from slack_surface.messages import ARGUMENTS_MAX, REQUEST_LINE_MAX, decision_blocks, escaped, timeout_text

CARD_TITLE = "⏸️ Approval request awaiting a decision"


def card_subject(request_id: Any) -> str:
    """What the card's buttons name after ``<integration>|``."""
    return f"request:{request_id}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _plain(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "plain_text", "emoji": False, "text": text}]}


def request_line(request: dict[str, Any] | None) -> str:
    """``POST https://payments.example/refunds``: a pinned request's method and URL, no header, cut."""
    if not request:
        return ""
    return _cut(f"{request.get('method') or ''} {request.get('url') or ''}".strip(), REQUEST_LINE_MAX)


def request_approval_card(pause: Pause, *, integration_name: str, buttons: bool) -> list[dict[str, Any]]:
    """The Block Kit card of the approval request ``pause`` asks about; buttons name ``request:<id>``."""
    details = action_pause_details(pause)
    request_id = details.get("approvalRequestId") or str(pause.subject_id)
    agent = str(details.get("agent") or "")
    if details.get("account"):
        agent += f" ({details['account']})"
    action = details.get("action") or {}
    fields = [
        {"type": "mrkdwn", "text": f"*Approval request*\n`{escaped(request_id)}`"},
        {"type": "mrkdwn", "text": f"*Agent*\n{escaped(agent)}"},
        {"type": "mrkdwn", "text": f"*Action*\n{escaped(str(action.get('name') or ''))}"},
        {"type": "mrkdwn", "text": f"*Reason*\n{escaped(pause.reason)}"},
    ]
    if details.get("onBehalfOf"):
        fields.append({"type": "mrkdwn", "text": f"*On behalf of*\n{escaped(details['onBehalfOf'])}"})
    fields.append({"type": "mrkdwn", "text": f"*Timeout*\n{escaped(timeout_text(pause))}"})
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": CARD_TITLE}},
        {"type": "section", "fields": fields},
    ]
    arguments = json.dumps(action.get("arguments") or {}, ensure_ascii=False, sort_keys=True)
    blocks.append(_plain(f"Arguments — {_cut(arguments, ARGUMENTS_MAX)}"))
    if line := request_line(details.get("request")):
        blocks.append(_plain(f"Request — {line}"))
    return blocks + decision_blocks(
        pause, integration_name=integration_name, subject=card_subject(request_id), buttons=buttons
    )
