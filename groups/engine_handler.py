"""The group engine's handler, registered with the HITL core at startup (approvals.engines)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from approvals.audit import AuditDraft, append_audit_entry
from approvals.engines import Resumed, register_engine
from approvals.leases import lease_expiry
from approvals.models import OPEN_STATUSES, Engine, Pause, SubjectType
from groups.discussion_continuation import resume_discussion
from groups.discussions import renew_lease
from groups.member_turns import GROUP_ACTOR
from groups.models import TERMINAL_STATES, DiscussionState, GroupConversation
from groups.transcript import own_error

S = DiscussionState
INTERRUPTED_NOTE = "Discussion interrupted: the process running it stopped before it finished"
REVIEW_INPUT = "[{phase}] {speaker}"


class GroupEngine:
    subject_word = "Group conversation"

    def subject_state(self, subject_id: object) -> str | None:
        return GroupConversation.objects.filter(pk=subject_id).values_list("state", flat=True).first()

    def check_can_continue(self, pause: Pause, subject: object | None = None) -> None:
        """Nothing to refuse before the compare-and-set: what could stop the resumed leg (config drift,
        a member no longer deployed) is checked when it starts, and restores the pause."""
        return None

    def continues_quickly(self, checked: object | None) -> bool:
        return False  # the rest of a discussion is member turns: never in the decision's transaction

    def begin_resume(
        self, pause: Pause, checked: object | None = None, audit: AuditDraft | None = None
    ) -> Resumed | None:  # the core appends the decision's entry
        moved = GroupConversation.objects.filter(pk=pause.subject_id, state=S.AWAITING_APPROVAL).update(
            state=S.IN_PROGRESS,
            turn_alive_until=lease_expiry(),
            cancel_requested_at=None,
            cancel_requested_by="",
            updated_at=timezone.now(),
        )
        return Resumed() if moved else None

    def on_cancelled(self, pause: Pause, *, mode: str) -> None:
        moved = (
            GroupConversation.objects.filter(pk=pause.subject_id)
            .exclude(state__in=TERMINAL_STATES)
            .update(
                state=S.CANCELLED, turn_alive_until=None, last_pause_fingerprint="", updated_at=timezone.now()
            )
        )
        if moved:
            append_audit_entry(
                subject_type=SubjectType.DISCUSSION,
                subject_id=pause.subject_id,
                verb="hitl.discussion.finished",
                actor=pause.decided_by or pause.cancel_requested_by or GROUP_ACTOR.name,
                automated=pause.automated,
                pause_id=pause.id,
                epoch=pause.epoch,
                detail={"state": S.CANCELLED, "mode": mode},
            )

    def on_restored(self, pause: Pause) -> None:
        GroupConversation.objects.filter(pk=pause.subject_id, state=S.IN_PROGRESS).update(
            state=S.AWAITING_APPROVAL, turn_alive_until=None, updated_at=timezone.now()
        )

    def continue_pause(
        self, pause: Pause, checked: object | None = None, held: object | None = None
    ) -> object | None:
        return resume_discussion(pause)

    def renew_turn(self, subject_id: object, until: datetime) -> None:
        renew_lease(subject_id, until)

    def interrupt_stale_turns(self, *, now: datetime, older_than: datetime) -> int:
        """Discussions left IN_PROGRESS by a dead process, with no open pause, whose lease expired (or,
        without one, that were last saved before ``older_than``) fail, with the reason in the transcript."""
        open_pause = Pause.objects.filter(
            subject_type=SubjectType.DISCUSSION, subject_id=OuterRef("pk"), status__in=OPEN_STATUSES
        )
        stale = (
            GroupConversation.objects.filter(state=S.IN_PROGRESS)
            .filter(Q(turn_alive_until__lt=now) | Q(turn_alive_until__isnull=True, updated_at__lt=older_than))
            .exclude(Exists(open_pause))
        )
        interrupted = 0
        for discussion_id in stale.values_list("id", flat=True):
            with transaction.atomic():
                discussion = (
                    GroupConversation.objects.select_for_update()
                    .filter(pk=discussion_id, state=S.IN_PROGRESS)
                    .exclude(Exists(open_pause))
                    .first()
                )
                if discussion is None:
                    continue
                discussion.transcript.append(_interrupted_entry(discussion))
                discussion.state, discussion.turn_alive_until = S.FAILED, None
                discussion.save(update_fields=["state", "transcript", "turn_alive_until", "updated_at"])
                interrupted += 1
                append_audit_entry(
                    subject_type=SubjectType.DISCUSSION,
                    subject_id=discussion_id,
                    verb="hitl.discussion.finished",
                    actor="system:recovery",
                    automated=True,
                    detail={"state": S.FAILED, "reason": "abandoned by a dead process"},
                )
        return interrupted

    def review_turns(self, pause: Pause, limit: int, *, until: datetime | None = None) -> list[dict]:
        """The transcript's latest entries, oldest first, as turns: who spoke in which phase, and what."""
        discussion = GroupConversation.objects.filter(pk=pause.subject_id).only("transcript").first()
        entries = (discussion.transcript if discussion else [])[-max(0, limit) :] if limit > 0 else []
        return [
            {
                "input": REVIEW_INPUT.format(
                    phase=e.get("phase"), speaker=e.get("role") or e.get("member") or "discussion"
                ),
                "actions": [e.get("status", "")],
                "output": [e.get("content") or e.get("note") or ""],
            }
            for e in entries
        ]


def _interrupted_entry(discussion: GroupConversation) -> dict:
    return own_error(None, INTERRUPTED_NOTE) | {"phaseIndex": discussion.phase_index}


def register() -> None:
    register_engine(Engine.GROUP, GroupEngine())
