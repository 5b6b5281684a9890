"""The HITL core's data: one Pause row per pause, and the append-only audit ledger."""

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import Q
from django.db.models.functions import Upper


class Engine(models.TextChoices):
    """What runs a paused subject and continues it after the decision: 1:1 conversations (``regular``),
    group discussions (``group``) or approval requests of agents that run elsewhere (``request``). A pause stores it as ``surface``, the name the REST API, the metrics
    labels and the audit details show (approvals.engines: the handler each engine registers)."""

    REGULAR = "regular"
    GROUP = "group"
    REQUEST = "request"


class PauseKind(models.TextChoices):
    RULE = "RULE"
    TOOL_CALL = "TOOL_CALL"
    PHASE = "PHASE"
    TASK = "TASK"
    ACTION = "ACTION"  # an approval request: one action an agent running elsewhere asks to take


class PauseStatus(models.TextChoices):
    PENDING = "PENDING"
    RESOLVING = "RESOLVING"
    RESOLVED = "RESOLVED"
    CANCELLED = "CANCELLED"


class TimeoutPolicy(models.TextChoices):
    WAIT_INDEFINITELY = "WAIT_INDEFINITELY"
    AUTO_APPROVE = "AUTO_APPROVE"
    AUTO_REJECT = "AUTO_REJECT"
    ABORT = "ABORT"


class Verdict(models.TextChoices):
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"


class SubjectType(models.TextChoices):
    CONVERSATION = "conversation"
    DISCUSSION = "discussion"
    APPROVAL_REQUEST = "approval_request"


OPEN_STATUSES = (PauseStatus.PENDING, PauseStatus.RESOLVING)
# Pauses someone (or something) decided or cancelled: what the admin's "Decided approvals" history lists.
DECIDED_STATUSES = (PauseStatus.RESOLVING, PauseStatus.RESOLVED, PauseStatus.CANCELLED)


class Pause(models.Model):
    """One pause of one subject (a conversation or a group discussion), from PENDING to its end.

    Every transition is a compare-and-set on ``status``; ``due_at`` is the deadline (null: wait forever)
    and is cleared only by a successful transition to RESOLVED or CANCELLED.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    surface = models.CharField(max_length=16, choices=Engine.choices)
    kind = models.CharField(max_length=16, choices=PauseKind.choices)
    subject_type = models.CharField(max_length=16, choices=SubjectType.choices)
    subject_id = models.UUIDField()
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The user whose turn raised the pause (the owner, or an admin talking to the conversation).
    raised_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # hitlConfig.allowSelfApproval as it was when the pause opened (approvals.self_approval): frozen, so a
    # later agent version or setting never changes who may decide a pending pause.
    allow_self_approval = models.BooleanField(default=True)
    agent_id = models.UUIDField(null=True, blank=True)
    agent_version = models.PositiveIntegerField(null=True, blank=True)
    group_id = models.UUIDField(null=True, blank=True)
    epoch = models.UUIDField(default=uuid.uuid4, editable=False)
    status = models.CharField(max_length=16, choices=PauseStatus.choices, default=PauseStatus.PENDING)
    reason = models.CharField(max_length=500)
    timeout_policy = models.CharField(
        max_length=24, choices=TimeoutPolicy.choices, default=TimeoutPolicy.WAIT_INDEFINITELY
    )
    approval_timeout = models.CharField(max_length=64, blank=True, default="")
    paused_at = models.DateTimeField()
    due_at = models.DateTimeField(null=True, blank=True)
    bookmark = models.JSONField(default=dict, blank=True)
    details = models.JSONField(default=dict, blank=True)
    tool_names = models.JSONField(default=list, blank=True)
    # The decision, set by the PENDING -> RESOLVING (or CANCELLED) compare-and-set.
    verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True, default="")
    note = models.TextField(blank=True, default="")
    decided_by = models.CharField(max_length=191, blank=True, default="")
    decided_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    automated = models.BooleanField(default=False)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_details = models.JSONField(default=dict, blank=True)
    # The continuation's lease while it runs on a worker (RESOLVING).
    lease_until = models.DateTimeField(null=True, blank=True)
    # A cancel that landed after the decision (RESOLVING): its continuation stops before its next task.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.CharField(max_length=191, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    # django-q2 Schedule primary key of this pause's one-shot timer (deleted by key, never by name).
    schedule_id = models.BigIntegerField(null=True, blank=True)
    # A timer drainer's claim on an overdue pause while it fires it (or until a failed fire may retry).
    fire_claimed_until = models.DateTimeField(null=True, blank=True)
    # Who approves (approvals.routing), frozen when the pause opens: ``routed`` when hitlConfig named
    # approvers or escalation steps (its PauseRoute rows say who, from when); ``required_approvals``
    # distinct people must approve (their Votes); ``routing`` the frozen configuration, as shown.
    routed = models.BooleanField(default=False, db_default=False)
    required_approvals = models.PositiveSmallIntegerField(default=1, db_default=1)
    routing = models.JSONField(default=dict, blank=True, db_default={})
    # When its current approvers are reminded (the deadline less hitlConfig.remindBefore; approvals.notices).
    remind_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subject_type", "subject_id"],
                condition=Q(status__in=["PENDING", "RESOLVING"]),
                name="one_open_pause_per_subject",
            ),
        ]
        indexes = [
            # Pending pauses oldest first (the retention sweep, the admin inbox sorted by "paused"), and by
            # owner (the admin inbox of a staff owner sorted so, the per-user cap's count).
            models.Index(fields=["paused_at"], condition=Q(status="PENDING"), name="pause_pending_inbox"),
            models.Index(
                fields=["owner", "paused_at"], condition=Q(status="PENDING"), name="pause_pending_owner_inbox"
            ),
            # Every inbox lists what is due first (approvals.selectors.due_first: deadline, NULLs last as an
            # ascending index keeps them, then paused_at, then id). This one also serves the timers, which
            # read the pending pauses by deadline; the next serves a staff owner's admin inbox.
            models.Index(
                fields=["due_at", "paused_at", "id"], condition=Q(status="PENDING"), name="pause_pending_due"
            ),
            models.Index(
                fields=["owner", "due_at", "paused_at", "id"],
                condition=Q(status="PENDING"),
                name="pause_pending_owner_due",
            ),
            # The group inboxes (every group's, one group's): pending group pauses only, so none walks
            # the 1:1 backlog and a 1:1 pause never writes these three.
            models.Index(
                fields=["due_at", "paused_at", "id"],
                condition=Q(status="PENDING", surface="group"),
                name="pause_pending_group_inbox",
            ),
            models.Index(
                fields=["group_id", "due_at", "paused_at", "id"],
                condition=Q(status="PENDING", surface="group"),
                name="pause_pending_per_group",
            ),
            # A plain user's every-group inbox: without it, it read through the user's own 1:1 backlog.
            models.Index(
                fields=["owner", "due_at", "paused_at", "id"],
                condition=Q(status="PENDING", surface="group"),
                name="pause_pending_group_owner",
            ),
            # The 1:1 inbox (``agents/pending-approvals``, every caller's and one owner's): pending 1:1
            # pauses only, so a backlog of group pauses never makes it read past them.
            models.Index(
                fields=["due_at", "paused_at", "id"],
                condition=Q(status="PENDING", surface="regular"),
                name="pause_pending_regular_inbox",
            ),
            models.Index(
                fields=["owner", "due_at", "paused_at", "id"],
                condition=Q(status="PENDING", surface="regular"),
                name="pause_pending_regular_owner",
            ),
            models.Index(fields=["subject_type", "subject_id", "paused_at"], name="pause_subject"),
            models.Index(fields=["remind_at"], condition=Q(status="PENDING"), name="pause_pending_reminder"),
            # The admin inbox's search (approvals.admin.search): a word found anywhere in the reason
            # (trigrams serve ``UPPER(reason) LIKE '%…%'``, Django's icontains), and pauses by agent.
            GinIndex(
                OpClass(Upper("reason"), name="gin_trgm_ops"),
                condition=Q(status="PENDING"),
                name="pause_pending_reason_trgm",
            ),
            models.Index(
                fields=["agent_id", "paused_at"], condition=Q(status="PENDING"), name="pause_pending_agent"
            ),
            # The admin's history (approvals.admin.history), newest decision first: everyone's (admins,
            # approvers), a reviewer's own decisions ("decided by me", its default) and a staff owner's
            # conversations. Decided pauses only, so the pending backlog is never in the way.
            models.Index(
                fields=["-decided_at", "-id"], condition=Q(status__in=DECIDED_STATUSES), name="pause_decided"
            ),
            models.Index(
                fields=["decided_by_user", "-decided_at", "-id"],
                condition=Q(status__in=DECIDED_STATUSES),
                name="pause_decided_by_user",
            ),
            models.Index(
                fields=["owner", "-decided_at", "-id"],
                condition=Q(status__in=DECIDED_STATUSES),
                name="pause_decided_owner",
            ),
            # Its search (approvals.admin.search, the inbox's): each arm of the OR needs an index over
            # decided pauses too, or PostgreSQL reads them all (a reason search: 270 ms at 100,000).
            GinIndex(
                OpClass(Upper("reason"), name="gin_trgm_ops"),
                condition=Q(status__in=DECIDED_STATUSES),
                name="pause_decided_reason_trgm",
            ),
            models.Index(
                fields=["agent_id", "-decided_at"],
                condition=Q(status__in=DECIDED_STATUSES),
                name="pause_decided_agent",
            ),
            models.Index(
                fields=["group_id"],
                condition=Q(status__in=DECIDED_STATUSES, surface="group"),
                name="pause_decided_group",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} pause {self.id} ({self.status})"


class AuditEntry(models.Model):
    """One entry of the append-only ledger. Entries of one subject form an HMAC chain."""

    id = models.BigAutoField(primary_key=True)
    subject_type = models.CharField(max_length=16, choices=SubjectType.choices)
    subject_id = models.UUIDField()
    sequence = models.PositiveBigIntegerField()
    conversation_id = models.UUIDField(null=True, blank=True)
    pause_id = models.UUIDField(null=True, blank=True)
    epoch = models.UUIDField(null=True, blank=True)
    verb = models.CharField(max_length=64)
    actor = models.CharField(max_length=191)
    automated = models.BooleanField(default=False)
    verdict = models.CharField(max_length=16, blank=True, default="")
    note = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subject_type", "subject_id", "sequence"], name="audit_gap_free_sequence"
            ),
        ]
        indexes = [
            models.Index(fields=["pause_id"], name="audit_pause"),
            models.Index(fields=["conversation_id"], name="audit_conversation"),
            models.Index(fields=["actor", "created_at"], name="audit_actor"),
            models.Index(fields=["verb", "created_at"], name="audit_verb"),
            models.Index(fields=["created_at"], name="audit_created"),
        ]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.verb} by {self.actor} ({self.subject_type} {self.subject_id} #{self.sequence})"


class AuditHead(models.Model):
    """The newest entry of each subject's chain: the row appends lock, and what exposes a deleted tail."""

    subject_type = models.CharField(max_length=16, choices=SubjectType.choices)
    subject_id = models.UUIDField()
    last_sequence = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subject_type", "subject_id"], name="audit_head_per_subject"),
        ]

    def __str__(self) -> str:
        return f"audit head of {self.subject_type} {self.subject_id} at #{self.last_sequence}"


class PauseRoute(models.Model):
    """Who may decide a routed pause, from when: one row per username or Django group its hitlConfig
    names, ``opens_at`` the pause's start for its approvers and each escalation step's time for that
    step's (approvals.routing). Written with the pause, never changed."""

    pause = models.ForeignKey(Pause, on_delete=models.CASCADE, related_name="routes", db_index=False)
    step = models.PositiveSmallIntegerField()  # 0: the approvers; 1..: the escalation steps, in order
    opens_at = models.DateTimeField()
    username = models.CharField(max_length=150, blank=True, default="")
    group_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["pause", "opens_at"], name="route_of_pause"),
            models.Index(fields=["username", "opens_at"], condition=~Q(username=""), name="route_user"),
            models.Index(fields=["group_name", "opens_at"], condition=~Q(group_name=""), name="route_group"),
        ]

    def __str__(self) -> str:
        return f"{self.username or 'group ' + self.group_name} from {self.opens_at} (pause {self.pause_id})"


class Vote(models.Model):
    """One person's approval of a pause that needs several (``Pause.required_approvals``); a pause is decided
    by the compare-and-set that records the last one needed. One vote per person and pause."""

    pause = models.ForeignKey(Pause, on_delete=models.CASCADE, related_name="votes", db_index=False)
    # The person: an account of ours, or none for a Slack user (``slack:U1``, deciding with the
    # integration's access). ``person`` is who counts once: the username for an account, whatever the
    # surface (``rita`` and ``mcp:rita`` are one person), the actor's name otherwise.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    person = models.CharField(max_length=191)
    voter = models.CharField(max_length=191)  # the actor's name as audited (``mcp:rita``, ``slack:U1``)
    note = models.TextField(blank=True, default="")
    voted_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pause", "person"], name="one_vote_per_person")]
        ordering = ["voted_at", "id"]

    def __str__(self) -> str:
        return f"{self.voter} approved pause {self.pause_id}"


class Notice(models.Model):
    """One notification of one event of a pause (it opened, an escalation step opened, a reminder, its
    decision), claimed once: the row is written before the message is sent (approvals.notices), so two
    timer clusters never send it twice; ``sent_at`` stays empty until the mail went out."""

    pause = models.ForeignKey(Pause, on_delete=models.CASCADE, related_name="notices", db_index=False)
    event = models.CharField(max_length=16)
    step = models.PositiveSmallIntegerField(default=0)
    recipients = models.JSONField(default=list, blank=True)  # usernames, for the record
    claimed_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pause", "event", "step"], name="one_notice_per_event"),
        ]
        indexes = [models.Index(fields=["claimed_at"], condition=Q(sent_at=None), name="notice_unsent")]

    def __str__(self) -> str:
        return f"{self.event} notice of pause {self.pause_id}"


class PendingApproval(Pause):
    """The admin inbox's view of a Pause (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "pending approval"
        verbose_name_plural = "pending approvals"


class DecidedApproval(Pause):
    """The admin history's view of a Pause (a proxy: no table of its own): decided and cancelled pauses,
    and every pause of one conversation or discussion (approvals.admin.history)."""

    class Meta:
        proxy = True
        verbose_name = "decided approval"
        verbose_name_plural = "decided approvals"
