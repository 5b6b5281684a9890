"""Deciding and cancelling an approval request: the one service REST, MCP, Slack and the admin call.

The decision is the core's (approvals.decisions): the pause's compare-and-set, its audit entry and the
request's new status (this engine's handler) commit together. Check order: body (400) -> access
(403/404) -> state (409); bad input never consumes a request.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from approval_requests import webhooks
from approval_requests.decision_rules import parse_request_decision
from approval_requests.models import ApprovalRequest, RequestStatus
from approval_requests.selectors import cancellable_request, decidable_request
from approvals.actors import Actor, actor_for_user
from approvals.audit import append_audit_entry
from approvals.continuation_runs import decide_and_continue
from approvals.decisions import cancel_pending_pause, open_pause_of
from approvals.models import Engine, SubjectType
from common.errors import WrongState


def decide_approval_request(
    *, user: Any, request_id: Any, body: Any, actor: Actor | None = None
) -> ApprovalRequest:
    """Decide the pending request ``request_id`` as ``user`` (recorded as ``actor`` when the surface has
    its own name, e.g. ``mcp:alice``, ``slack:U…``) and return it as decided."""
    decision = parse_request_decision(body)
    request = decidable_request(user, request_id)
    decide_and_continue(
        surface=Engine.REQUEST,
        subject_type=SubjectType.APPROVAL_REQUEST,
        subject_id=request.pk,
        decision=decision,
        actor=actor or actor_for_user(user),
        what="Approval request",
    )
    return ApprovalRequest.objects.select_related("account", "on_behalf_of").get(pk=request.pk)


def cancel_approval_request(*, user: Any, request_id: Any, actor: Actor | None = None) -> ApprovalRequest:
    """Withdraw a request: a pending one ends CANCELLED (the core's cancel); an approved one nobody has
    claimed yet too, so its grant can never be claimed. Anything else is a 409 naming its status."""
    request = cancellable_request(user, request_id)
    actor = actor or actor_for_user(user)
    with transaction.atomic():
        pause = open_pause_of(SubjectType.APPROVAL_REQUEST, request.pk)
        if pause is not None and cancel_pending_pause(pause=pause, actor=actor):
            return _reread(request)
        withdrawn = ApprovalRequest.objects.filter(
            pk=request.pk, status=RequestStatus.APPROVED, claimed_at__isnull=True
        ).update(status=RequestStatus.CANCELLED, grant_expires_at=None)
        if not withdrawn:
            current = _reread(request).status
            raise WrongState(
                f"Approval request is not in a cancellable state (current state: {current}) - it was "
                "decided, claimed or ended already.",
                current_state=current,
            )
        append_audit_entry(
            subject_type=SubjectType.APPROVAL_REQUEST,
            subject_id=request.pk,
            verb="hitl.request.withdrawn",
            actor=actor.name,
            automated=actor.automated,
            verdict="CANCELLED",
            pause_id=request.pause_id,
            detail={"previousStatus": RequestStatus.APPROVED, "at": timezone.now().isoformat()},
        )
        webhooks.queue_event(request.pk, webhooks.CANCELLED)
    return _reread(request)


def _reread(request: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.select_related("account", "on_behalf_of").get(pk=request.pk)
