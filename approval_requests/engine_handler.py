"""The approval requests' handler, registered with the HITL core at startup (approvals.engines).

A decision on an approval request has nothing to run: its continuation moves the request to APPROVED or
REJECTED with what the approval grants (the arguments and pinned request as approved, amended or not,
and the grant's expiry), finishes the pause and queues the webhook, all in the decision's transaction
(it is quick). A cancel or an ABORT timeout moves it to CANCELLED or EXPIRED the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from approval_requests import decision_rules, pinning, review, webhooks
from approval_requests.models import ApprovalRequest, RequestStatus
from approvals.audit import AuditDraft
from approvals.decisions import finish_pause
from approvals.engines import Resumed, register_engine
from approvals.models import Engine, Pause, PauseKind, Verdict
from approvals.pause_kinds import register_decision_validator, register_details_provider
from common.durations import positive_duration

ABORTED = "TIMEOUT_ABORT"  # the mode of the core's cancel when an ABORT timeout fires


def grant_expiry(decided_at: datetime) -> datetime:
    return decided_at + positive_duration(settings.HITL_GRANT_TTL)


def granted(request: ApprovalRequest, details: dict[str, Any]) -> dict[str, Any]:
    """What an approval with ``details`` (the pause's decision details) grants: the arguments and the
    pinned request as approved, and the fingerprint the claim must match."""
    arguments = details.get("amendedArguments", request.arguments)
    shown = request.request_preview
    fingerprint = request.request_fingerprint
    if shown is not None and "amendedRequest" in details:
        edited = pinning.amended(shown, details["amendedRequest"])
        shown = pinning.preview(edited)
        fingerprint = pinning.fingerprint(edited, request.secret_digests)
    return {"approved_arguments": arguments, "approved_request": shown, "approved_fingerprint": fingerprint}


class RequestEngine:
    subject_word = "Approval request"

    def subject_state(self, subject_id: object) -> str | None:
        return ApprovalRequest.objects.filter(pk=subject_id).values_list("status", flat=True).first()

    def check_can_continue(self, pause: Pause, subject: object | None = None) -> None:
        return None

    def continues_quickly(self, checked: object | None) -> bool:
        return True  # nothing leaves the process: the request is marked, the webhook only queued

    def begin_resume(
        self, pause: Pause, checked: object | None = None, audit: AuditDraft | None = None
    ) -> Resumed | None:  # the core appends the decision's entry
        verdict, details = Pause.objects.filter(pk=pause.pk).values_list("verdict", "decision_details").get()
        request = ApprovalRequest.objects.filter(pk=pause.subject_id, status=RequestStatus.PENDING).first()
        if request is None:
            return None
        now = timezone.now()
        values: dict[str, Any] = {"decided_at": now}
        if verdict == Verdict.APPROVED:
            values |= {"status": RequestStatus.APPROVED, "grant_expires_at": grant_expiry(now)}
            values |= granted(request, details or {})
        else:
            values["status"] = RequestStatus.REJECTED
        moved = ApprovalRequest.objects.filter(pk=request.pk, status=RequestStatus.PENDING).update(**values)
        return Resumed() if moved else None

    def on_cancelled(self, pause: Pause, *, mode: str) -> None:
        status = RequestStatus.EXPIRED if mode == ABORTED else RequestStatus.CANCELLED
        moved = ApprovalRequest.objects.filter(pk=pause.subject_id, status=RequestStatus.PENDING).update(
            status=status, decided_at=timezone.now()
        )
        if moved:
            webhooks.queue_event(pause.subject_id, webhooks.EVENT_FOR[status])

    def on_restored(self, pause: Pause) -> None:
        ApprovalRequest.objects.filter(pk=pause.subject_id, claimed_at__isnull=True).exclude(
            status=RequestStatus.PENDING
        ).update(
            status=RequestStatus.PENDING,
            decided_at=None,
            approved_arguments=None,
            approved_request=None,
            approved_fingerprint="",
            grant_expires_at=None,
        )

    def continue_pause(self, pause: Pause, checked: object | None = None, held: object | None = None) -> None:
        finish_pause(pause=pause, outcome="completed")
        webhooks.queue_event(pause.subject_id, webhooks.DECIDED)
        return None

    def renew_turn(self, subject_id: object, until: datetime) -> None:
        return None  # no turn runs for an approval request

    def interrupt_stale_turns(self, *, now: datetime, older_than: datetime) -> int:
        return 0

    def review_turns(self, pause: Pause, limit: int, *, until: datetime | None = None) -> list[dict]:
        return []  # what the agent sent as context is in the pause details


def register() -> None:
    register_engine(Engine.REQUEST, RequestEngine())
    register_decision_validator(PauseKind.ACTION, decision_rules.validate_action_decision)
    register_details_provider(PauseKind.ACTION, review.action_pause_details)
