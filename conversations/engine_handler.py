"""The regular (1:1) engine's handler, registered with the HITL core at startup."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from approvals.audit import AuditDraft, append_audit_entry
from approvals.engines import Resumed, register_engine
from approvals.leases import lease_expiry
from approvals.models import OPEN_STATUSES, Engine, Pause, SubjectType
from approvals.optimistic_audit import entry_on
from approvals.timer_arming import DecisionWrite
from common import rows
from conversations import approval_outlook
from conversations.agents import OnVersion, conversation_and_its_version
from conversations.errors import NotDeployed
from conversations.local_turns import runs_in_one_transaction
from conversations.models import Conversation, ConversationState, ConversationStep
from conversations.resume_rows import begin_paused_turn
from conversations.turn_commits import renew_turn
from conversations.turn_continuation import continue_after_decision

S = ConversationState


class ConversationEngine:
    subject_word = "Conversation"

    def subject_state(self, subject_id: object) -> str | None:
        return Conversation.objects.filter(pk=subject_id).values_list("state", flat=True).first()

    def check_can_continue(self, pause: Pause, subject: object | None = None) -> OnVersion:
        """The paused conversation and the deployed version it runs on (never None: not deployed is
        refused). ``subject``: the conversation on its version as the resume request's access check read
        it (``decision_on_version``); any other value, or a different conversation, is read here."""
        if isinstance(subject, OnVersion) and subject.conversation.pk == pause.subject_id:
            found = subject
        else:
            found = conversation_and_its_version(pause.subject_id)
        conversation, version = found.conversation, found.version
        if version is None:
            raise NotDeployed(
                f"Agent not deployed for resume (agent {conversation.agent_id} version "
                f"{conversation.agent_version} in {conversation.environment}) - the conversation remains "
                "AWAITING_HUMAN; redeploy the agent and retry",
                currentState=S.AWAITING_HUMAN,
            )
        return found

    def continues_quickly(self, checked: object | None) -> bool:
        return (
            isinstance(checked, OnVersion)
            and checked.version is not None
            and runs_in_one_transaction(checked.version.document)
        )

    def begin_resume(
        self, pause: Pause, checked: object | None = None, audit: AuditDraft | None = None
    ) -> Resumed | None:
        """AWAITING_HUMAN -> IN_PROGRESS; on PostgreSQL the same statement reads the paused turn's window
        and either appends ``audit`` on the audit head the check read (``OnVersion.audit_head``) or locks
        the head for the core's append (``conversations.resume_rows``)."""
        if rows.on_postgresql():
            return self._begin(pause, checked, audit)
        started, alive_until = timezone.now(), lease_expiry()
        moved = rows.update(
            Conversation,
            where={"id": pause.subject_id, "state": S.AWAITING_HUMAN},
            values={
                "state": S.IN_PROGRESS,
                "turn_started_at": started,
                "turn_alive_until": alive_until,
                "cancel_requested_at": None,
                "cancel_requested_by": "",
            },
        )
        return Resumed() if moved else None

    def _begin(
        self,
        pause: Pause,
        checked: object | None,
        audit: AuditDraft | None,
        decision: DecisionWrite | None = None,
    ) -> Resumed | None:
        seen = checked.audit_head if isinstance(checked, OnVersion) else None
        entry = entry_on(seen, audit) if audit is not None else None
        turn = begin_paused_turn(
            pause.subject_id,
            started=timezone.now(),
            alive_until=lease_expiry(),
            appending=(seen, entry) if seen is not None and entry is not None else None,
            decision=decision,
        )
        if turn is None:
            return None
        return Resumed(head=turn.head, held=turn.window, appended=turn.appended)

    def begin_decided_resume(
        self, pause: Pause, checked: object | None, audit: AuditDraft, decision: DecisionWrite
    ) -> Resumed | None:
        """``begin_resume`` (PostgreSQL) in the statement of the decision's own compare-and-set: the
        conversation moves only when the decision won (``EngineHandler``'s optional method)."""
        return self._begin(pause, checked, audit, decision)

    def on_cancelled(self, pause: Pause, *, mode: str) -> None:
        target = S.ENDED if mode == "END_CONVERSATION" else S.EXECUTION_INTERRUPTED
        Conversation.objects.filter(pk=pause.subject_id).exclude(state=S.ENDED).update(state=target)

    def on_restored(self, pause: Pause) -> None:
        Conversation.objects.filter(pk=pause.subject_id, state=S.IN_PROGRESS).update(state=S.AWAITING_HUMAN)

    def continue_pause(
        self, pause: Pause, checked: object | None = None, held: object | None = None
    ) -> object | None:
        return continue_after_decision(
            pause,
            checked if isinstance(checked, OnVersion) else None,
            window=held if isinstance(held, list) else None,
        )

    def renew_turn(self, subject_id: object, until: datetime) -> None:
        renew_turn(subject_id, until)

    def interrupt_stale_turns(self, *, now: datetime, older_than: datetime) -> int:
        """Turns left IN_PROGRESS by a dead process, with no open pause, become EXECUTION_INTERRUPTED: their
        lease expired (its heartbeat stopped), or, for a turn that has none, it started before ``older_than``."""
        open_pause = Pause.objects.filter(
            subject_type=SubjectType.CONVERSATION, subject_id=OuterRef("pk"), status__in=OPEN_STATUSES
        )
        stale = (
            Conversation.objects.filter(state=S.IN_PROGRESS)
            .filter(
                Q(turn_alive_until__lt=now)
                | Q(turn_alive_until__isnull=True, turn_started_at__lt=older_than)
                | Q(turn_alive_until__isnull=True, turn_started_at__isnull=True, updated_at__lt=older_than)
            )
            .exclude(Exists(open_pause))
        )
        interrupted = 0
        for conversation_id in stale.values_list("id", flat=True):
            with transaction.atomic():
                if (
                    Conversation.objects.filter(pk=conversation_id, state=S.IN_PROGRESS)
                    .exclude(Exists(open_pause))
                    .update(state=S.EXECUTION_INTERRUPTED)
                ):
                    interrupted += 1
                    append_audit_entry(
                        subject_type=SubjectType.CONVERSATION,
                        subject_id=conversation_id,
                        verb="hitl.turn.interrupted",
                        actor="system:recovery",
                        automated=True,
                        conversation_id=conversation_id,
                        detail={"reason": "turn abandoned by a dead process"},
                    )
        return interrupted

    def review_turns(self, pause: Pause, limit: int, *, until: datetime | None = None) -> list[dict]:
        """The latest live steps of the paused conversation, oldest first (one query); ``until``: only
        the steps begun by then (a step the decision continued shows what it went on to say)."""
        steps = ConversationStep.objects.filter(conversation_id=pause.subject_id, undone=False)
        if until is not None:
            steps = steps.filter(created_at__lte=until)
        rows = steps.order_by("-index").values("input", "actions", "output")[: max(0, limit)]
        return [
            {"input": row["input"], "actions": list(row["actions"]), "output": list(row["output"])}
            for row in list(rows)[::-1]
        ]

    # --- the reviewer's outlook (approvals.admin.outlook): read-only, allow-listed ---------------------

    def approve_steps(self, pause: Pause) -> list[str] | None:
        """What approving a RULE pause runs, as labels (conversations.approval_outlook)."""
        return approval_outlook.approve_steps(pause)

    def latest_inputs(self, subject_ids: list[object]) -> dict[object, str]:
        """The requester's latest input of each conversation, in one query."""
        return approval_outlook.latest_inputs(subject_ids)


def register() -> None:
    register_engine(Engine.REGULAR, ConversationEngine())
