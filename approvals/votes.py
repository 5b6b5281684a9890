"""N-of-M approval: a pause that needs several people's approvals (``Pause.required_approvals``).

Each approval is a vote, recorded and audited on its own (``hitl.vote``) while the pause waits; the vote
that brings the count to N is the decision, through the same compare-and-set as any other. Votes are
taken with the pause's row locked (``SELECT … FOR UPDATE``), so concurrent votes are counted one after
another and N+1 people approving at once give exactly one decision: the (N+1)-th finds the pause decided.

Rules:

- One person, one vote: a person is an account of ours (``rita`` and ``mcp:rita`` are one), or a Slack
  user (``slack:U1``). A second vote is refused (409), nothing recorded.
- The requester and the user who raised the pause never count (separation of duties, whatever
  ``allowSelfApproval`` says): their vote is refused (403). They may still cancel.
- Any one rejection rejects: a rejection is a decision, not a vote.
- A vote approves the pause as it was asked: per-call verdicts, edits and task verdicts are refused
  (400, naming the field), since N people could not be said to have approved one edit. Reject with
  guidance instead, or approve as asked.
- A timeout, and any other system actor, decides by the timeout policy, votes or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateformat import format as date_format

from approvals.actors import Actor
from approvals.audit import append_audit_entry
from approvals.decision_input import DecisionInput
from approvals.models import Pause, Verdict, Vote
from common.errors import BadRequest, Conflict, Forbidden

REQUESTER_NEVER_COUNTS = (
    "The requester of a pause, and the user who raised it, never count toward its approvals: someone "
    "else must approve it (you may cancel it)"
)
AS_ASKED_ONLY = "only valid with a single approval: a pause that needs {n} approvals is approved as asked"


@dataclass(frozen=True)
class Tally:
    """The approvals of a pause still waiting for more: who approved, when, and how many it needs."""

    votes: tuple[tuple[str, datetime], ...]
    required: int

    @property
    def count(self) -> int:
        return len(self.votes)

    @property
    def missing(self) -> int:
        return self.required - self.count

    def text(self) -> str:
        """E.g. "1 of 2 approvals: alice, 10:02"."""
        said = ", ".join(f"{who}, {date_format(timezone.localtime(at), 'H:i')}" for who, at in self.votes)
        return f"{self.count} of {self.required} approvals" + (f": {said}" if said else "")

    def as_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "required": self.required,
            "by": [{"voter": who, "at": at.isoformat()} for who, at in self.votes],
        }


VOTE_RECORDED = "VOTE_RECORDED"


def vote_answer(pause: Pause, tally: Tally) -> dict[str, object]:
    """What every surface answers for a vote that left the pause waiting: ``status`` VOTE_RECORDED, the
    pause, and its approvals so far."""
    return {"status": VOTE_RECORDED, "pauseId": str(pause.id), "approvals": tally.as_json()}


def tally_of(pause: Pause) -> Tally:
    """The votes so far of ``pause`` (one query)."""
    votes = Vote.objects.filter(pause=pause).values_list("voter", "voted_at")
    return Tally(votes=tuple(votes), required=pause.required_approvals)


def takes_votes(pause: Pause, decision: DecisionInput, actor: Actor) -> bool:
    """This decision is one vote among several: a person's approval of a pause that needs more than one."""
    return pause.required_approvals > 1 and decision.verdict == Verdict.APPROVED and not actor.automated


def person_of(actor: Actor) -> str:
    return actor.user.get_username() if actor.user is not None else actor.name


def record_vote(pause: Pause, decision: DecisionInput, actor: Actor) -> Tally:
    """Record ``actor``'s approval of ``pause`` (locked by the caller, still PENDING) and return the votes so
    far, this one included; the caller decides the pause when they reach ``required``. Raises, with
    nothing recorded, for a vote the rules refuse (see the module)."""
    for field_name, given in (
        ("toolDecisions", decision.tool_decisions),
        ("taskApprovals", decision.task_approvals),
        *((name, True) for name in decision.amendments),
    ):
        if given:
            message = AS_ASKED_ONLY.format(n=pause.required_approvals)
            raise BadRequest(f"{field_name}: {message}", errors=[{"field": field_name, "message": message}])
    if actor.user_id is not None and actor.user_id in (pause.owner_id, pause.raised_by_id):
        raise Forbidden(REQUESTER_NEVER_COUNTS)
    now = timezone.now()
    try:
        with transaction.atomic():
            Vote.objects.create(
                pause=pause,
                user=actor.user,
                person=person_of(actor),
                voter=actor.name,
                note=decision.note,
                voted_at=now,
            )
    except IntegrityError:
        raise Conflict(
            f"You have already approved this pause ({tally_of(pause).text()}): it needs someone else."
        ) from None
    tally = tally_of(pause)
    append_audit_entry(
        subject_type=pause.subject_type,
        subject_id=pause.subject_id,
        verb="hitl.vote",
        actor=actor.name,
        automated=False,
        verdict=Verdict.APPROVED,
        note=decision.note,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={"approvals": tally.count, "requiredApprovals": tally.required, "surface": pause.surface},
    )
    return tally
