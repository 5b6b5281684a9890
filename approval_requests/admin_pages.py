"""An approval request's part of the admin decision page (approvals.pause_kinds.DecisionPage) and its
"Edit and approve" (approvals.pause_kinds.DecisionEdit), registered at startup for ACTION pauses.

The core page shows the reason, deadline and policy and takes the decision; this adds what only an
approval request holds: who asks (the agent, the service account that filed it, the person it is for),
the action with each argument on its own line, the pinned request exactly as it will be sent (a secret
header by its name only: its value was never stored), the agent's context and, once decided, what the
approval granted (the arguments and request as approved beside the filed ones), the claim and the
outcome the agent reported.

Only admins and approvers reach the page (the pause has no owner: approvals.selectors.decidable_by), so
while it waits the reviewer reads every byte (``action_pause_details(reviewer=True)``, as REST shows a
reviewer); a decided one is shown with credential-shaped values redacted, and its context only to
whoever may read a decided subject (admins: approvals.access.may_read_turns).

"Edit and approve" edits the arguments (their JSON) and, for a pinned request, its URL and body. The
edited inputs become the REST decision body (``amendedArguments``, ``amendedRequest``) and are parsed by
REST's own parser; the ACTION validator then refuses, inside the decision service and before anything
is consumed, what REST refuses (an edit the request forbids, an edited request that is not valid). A
request whose ``hitlConfig`` says ``allowEdit: false`` gets no inputs, one that says ``allowRespond:
false`` no reply with guidance.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from approval_requests.claims import reported_outcome
from approval_requests.decision_rules import parse_request_decision
from approval_requests.models import ApprovalRequest, RequestStatus
from approval_requests.review import action_pause_details
from approvals.decision_input import DecisionInput
from approvals.models import Pause, PauseKind, PauseStatus
from approvals.pause_kinds import (
    PageBlock,
    PageEdit,
    PageSection,
    PageTable,
    register_decision_edit,
    register_decision_page,
)
from common.errors import BadRequest
from toolgate.outbound import redact_json_value

CONTEXT_HIDDEN = "hidden: approvers read an approval request's context only while it waits for a decision"
# help text, not a password
SECRET_HELP = (  # nosec B105
    "A header the agent marked secret is shown by its name only: the service never kept its value, and "
    "the agent sends it as it holds it."
)
EDIT_HELP = (
    "The agent is granted exactly what you approve: these arguments and, for a pinned request, only this "
    "request (its secret headers stay as the agent sent them; method and other headers are edited through "
    "the REST API)."
)
NO_EDITS = (
    "This request does not allow edits (its hitlConfig says allowEdit: false): approve or reject it as it is."
)
# The edit inputs' names (the keys the DecisionEdit reads) and the REST body fields they become.
ARGUMENTS, URL, BODY = "arguments", "url", "body"


def _when(value: Any) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z") if value else "-"


def value_text(value: Any) -> str:
    """An argument's value exactly as JSON (a string in quotes, so "250" is not read as 250)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def request_text(shown: dict[str, Any]) -> str:
    """A pinned request as an HTTP message: the request line, each header, then the body."""
    lines = [f"{shown.get('method') or ''} {shown.get('url') or ''}"]
    lines += [f"{name}: {value}" for name, value in (shown.get("headers") or {}).items()]
    body = shown.get("body")
    return "\n".join(lines) + ("\n\n" + body if body is not None else "\n\n(no body)")


def _config(request: ApprovalRequest) -> dict[str, Any]:
    return request.hitl_config or {}


def _facts(request: ApprovalRequest, details: dict[str, Any]) -> list[tuple[str, str]]:
    pinned = request.request_preview is not None
    facts = [
        ("Approval request", str(request.id)),
        ("Agent", request.agent),
        ("Account", f"{details.get('account') or '-'} (the service account that filed it)"),
        ("On behalf of", details.get("onBehalfOf") or "-"),
        ("Action", request.action_name),
        (
            "Request",
            "pinned: it is granted only exactly as approved"
            if pinned
            else "not pinned: the agent runs the action with the approved arguments",
        ),
        ("Status", request.status),
    ]
    if request.status == RequestStatus.PENDING:
        return facts
    return facts + _granted_facts(request)


def _granted_facts(request: ApprovalRequest) -> list[tuple[str, str]]:
    """What became of it: the grant, the claim, the outcome the agent reported."""
    facts = [("Decided", _when(request.decided_at))]
    if request.approved_arguments is not None or request.claimed_at is not None:
        edited = request.approved_arguments != request.arguments or (
            request.approved_request != request.request_preview
        )
        facts.append(("Granted", "as edited by the reviewer (below)" if edited else "as filed"))
        facts.append(("Grant expires", _when(request.grant_expires_at)))
    if request.claimed_at is None:
        if request.status == RequestStatus.APPROVED:
            facts.append(("Claim", "not claimed yet"))
        return facts
    facts.append(("Claim", f"claimed at {_when(request.claimed_at)} (the agent was granted it, once)"))
    outcome = reported_outcome(request)
    if outcome is None:
        facts.append(("Outcome", "none reported: it may have run"))
    else:
        status = f" (HTTP {outcome['httpStatus']})" if outcome["httpStatus"] else ""
        summary = f": {outcome['summary']}" if outcome["summary"] else ""
        facts.append(("Outcome", f"{outcome['status']}{status} at {_when(outcome['reportedAt'])}{summary}"))
    return facts


def _arguments_table(filed: dict[str, Any], approved: dict[str, Any] | None) -> PageTable:
    """Each argument on its own line; once approved with other arguments, the filed and approved side by side."""
    if approved is None or approved == filed:
        rows = tuple((str(key), value_text(value)) for key, value in filed.items())
        return PageTable(f"Arguments ({len(rows)})", ("Argument", "Value"), rows)
    missing = object()
    keys = list(filed) + [key for key in approved if key not in filed]
    rows = tuple(
        (
            str(key),
            "(none)" if (before := filed.get(key, missing)) is missing else value_text(before),
            "(removed)" if (after := approved.get(key, missing)) is missing else value_text(after),
            "" if before is not missing and after is not missing and before == after else "changed",
        )
        for key in keys
    )
    return PageTable("Arguments: as filed and as approved", ("Argument", "As filed", "As approved", ""), rows)


def _blocks(
    request: ApprovalRequest, details: dict[str, Any], shown: Any, *, may_read: bool
) -> tuple[PageBlock, ...]:
    blocks = []
    filed = details.get("request")
    if filed is not None:
        pending = request.status == RequestStatus.PENDING
        heading = "Request as it will be sent" if pending else "Request as filed"
        blocks.append(PageBlock("request", heading, request_text(filed), SECRET_HELP))
        approved = request.approved_request
        if approved is not None and approved != request.request_preview:
            blocks.append(PageBlock("approved-request", "Request as approved", request_text(shown(approved))))
    if not may_read:
        context = CONTEXT_HIDDEN
    elif details.get("context") is None:
        context = "none sent"
    else:
        context = value_text(details["context"])
    blocks.append(PageBlock("context", "Agent's context", context))
    return tuple(blocks)


def _edits(request: ApprovalRequest) -> tuple[PageEdit, ...]:
    """The inputs of "Edit and approve", starting with what the reviewer reads (every byte, while it waits)."""
    if _config(request).get("allowEdit") is False:
        return ()
    edits = [
        PageEdit(
            ARGUMENTS,
            "Arguments (JSON)",
            value_text(request.arguments),
            json=True,
            multiline=True,
            help="The whole object: change a value, add or remove a key.",
            error_field="amendedArguments",
        )
    ]
    if (shown := request.request_preview) is not None:
        edits.append(PageEdit(URL, "Request URL", shown["url"], error_field="amendedRequest.url"))
        edits.append(
            PageEdit(
                BODY,
                "Request body",
                shown.get("body") or "",
                multiline=True,
                help="Sent exactly as written.",
                error_field="amendedRequest.body",
            )
        )
    return tuple(edits)


def _labels(request: ApprovalRequest) -> dict[str, str]:
    """What each answer does, in the words of the outlook (approvals.admin.outlook)."""
    action = request.action_name
    pinned = request.request_preview is not None
    labels = {
        "approve_label": f"Approve: grant {action} once, "
        + ("the request exactly as shown" if pinned else "with the arguments as shown"),
        "reject_label": f"Reject: {action} does not run",
        "note_help": "the agent reads it with your decision",
        "cancel_label": "Cancel the request: it ends CANCELLED without a decision (audited); the agent is "
        "told and can never claim it.",
        "cancel_hint": f"POST /approval-requests/{request.id}/cancel",
        "edit_label": f"Edit and approve: grant {action} once with your edited arguments"
        + (", and the request only exactly as you edited it" if pinned else "")
        + ", instead of the filed ones.",
    }
    if _config(request).get("allowRespond") is not False:
        labels["guidance_label"] = (
            f"Reply with guidance: {action} does not run (REJECTED); the agent gets your guidance as its "
            "instruction (decision.guidance) and may file a new request."
        )
        labels["guidance_help"] = "the agent reads it as your instruction (decision.guidance)"
    return labels


class RequestDecisionPage:
    def headline(self, pause: Pause) -> str:
        return pause.reason  # the agent's own words for what it asks

    def inbox_where(self, pause: Pause) -> str:
        return ""  # the row names the agent that filed it

    def inbox_label(self, pause: Pause) -> str:
        """The action and, when pinned, its request line ("refund → POST https://…"), from the row."""
        action = str((pause.tool_names or ["?"])[0])
        line = (pause.details or {}).get("requestLine")
        return f"{action} → {line}" if line else action

    def section(self, pause: Pause, *, may_read: bool) -> PageSection:
        request = ApprovalRequest.objects.filter(pk=pause.subject_id).first()
        if request is None:
            return PageSection(
                heading="Approval request", facts=(("Approval request", "gone"),), reads_turns=False
            )
        reviewer = pause.status == PauseStatus.PENDING  # an admin or approver (the page's only readers)
        details = action_pause_details(pause, reviewer=reviewer)
        shown = (lambda value: value) if reviewer else redact_json_value
        arguments = (details.get("action") or {}).get("arguments") or {}
        approved = shown(request.approved_arguments) if request.approved_arguments is not None else None
        edits = _edits(request) if reviewer else ()
        return PageSection(
            heading="Approval request",
            facts=tuple(_facts(request, details)),
            tables=(_arguments_table(arguments, approved),),
            blocks=_blocks(request, details, shown, may_read=may_read),
            reads_turns=False,
            edits=edits,
            edit_help=(EDIT_HELP if edits else NO_EDITS) if reviewer else "",
            **_labels(request),
        )

    def with_item_verdicts(self, decision: DecisionInput, verdicts: dict[str, str]) -> DecisionInput:
        """The REST decision body of this decision, parsed by REST's own parser (an approval request has
        no items)."""
        return parse_request_decision({"verdict": decision.verdict, "note": decision.note})

    def outcome(self, pause: Pause) -> str:
        request = ApprovalRequest.objects.filter(pk=pause.subject_id).first()
        if request is None:
            return "The approval request is gone."
        if request.status == RequestStatus.APPROVED:
            return (
                f"The approval request is now APPROVED: the agent may claim it once, until "
                f"{_when(request.grant_expires_at)}."
            )
        return f"The approval request is now {request.status}."


def _json_error(text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
        return f"is not valid JSON{where}"
    except RecursionError:
        return "is nested too deeply"
    return None if isinstance(value, dict) else "must be a JSON object ({…}): the action's arguments"


def edited_decision(pause: Pause, decision: DecisionInput, edits: dict[str, str]) -> DecisionInput:
    """The approval ``decision`` with the reviewer's edited inputs as the REST body's ``amendedArguments``
    and ``amendedRequest``, parsed by REST's parser; bad JSON is refused on ``amendedArguments``."""
    body: dict[str, Any] = {"verdict": decision.verdict, "note": decision.note}
    if ARGUMENTS in edits:
        if problem := _json_error(edits[ARGUMENTS]):
            raise BadRequest(
                f"amendedArguments: {problem}", errors=[{"field": "amendedArguments", "message": problem}]
            )
        body["amendedArguments"] = json.loads(edits[ARGUMENTS])
    amended_request = {part: edits[part] for part in (URL, BODY) if part in edits}
    if amended_request:
        body["amendedRequest"] = amended_request
    return parse_request_decision(body)


def register() -> None:
    register_decision_page(PauseKind.ACTION, RequestDecisionPage())
    register_decision_edit(PauseKind.ACTION, edited_decision)
