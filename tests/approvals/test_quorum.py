"""N-of-M approval: a pause that needs several people's approvals is decided by the vote that completes
the quorum, through the same compare-and-set as any decision. Real conversations through REST, real
PostgreSQL, real threads racing for the last vote."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections

from approvals.models import AuditEntry, Pause, PauseStatus, Vote
from harnesses.users import client_for, make_user
from tests.approvals.test_routing import approver_in, resume, routed_pause

TWO_PEOPLE = {"requiredApprovals": 2}


def approvers(*names: str):
    return [make_user(name, "approver") for name in names]


@pytest.mark.django_db
def test_the_second_approval_decides_and_each_vote_is_audited(alice):
    pause = routed_pause(alice, **TWO_PEOPLE)
    ann, ben = approvers("ann", "ben")

    first = resume(ann, pause, note="fine by me")
    assert first.status_code == 202, first.content
    assert first.json()["status"] == "VOTE_RECORDED"
    assert first.json()["approvals"]["count"] == 1 and first.json()["approvals"]["required"] == 2
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    status = client_for(ann).get(f"/agents/{pause.subject_id}/approval-status").json()
    assert status["approvals"]["by"][0]["voter"] == "ann"

    second = resume(ben, pause)
    assert second.status_code == 200, second.content
    decided = Pause.objects.get(pk=pause.pk)
    assert (
        decided.status != PauseStatus.PENDING
        and decided.verdict == "APPROVED"
        and decided.decided_by == "ben"
    )
    assert [e.actor for e in AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.vote")] == ["ann", "ben"]
    approval = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    assert approval.detail["approvedBy"] == ["ann", "ben"]


@pytest.mark.django_db
def test_one_persons_second_vote_is_refused(alice):
    pause = routed_pause(alice, **TWO_PEOPLE)
    (ann,) = approvers("ann")
    assert resume(ann, pause).status_code == 202
    again = resume(ann, pause)
    assert again.status_code == 409 and "already approved" in again.json()["detail"]
    assert Vote.objects.filter(pause=pause).count() == 1
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


@pytest.mark.django_db
def test_the_requester_never_counts_toward_the_quorum(admin_user):
    # an admin talking to the agent owns the conversation: even an admin's own request needs two others
    pause = routed_pause(admin_user, **TWO_PEOPLE, allowSelfApproval=True)
    refused = resume(admin_user, pause)
    assert refused.status_code == 403 and "never count" in refused.json()["detail"]
    assert not Vote.objects.filter(pause=pause).exists()
    assert client_for(admin_user).post(f"/agents/{pause.subject_id}/cancel").status_code in (200, 202)


@pytest.mark.django_db
def test_any_one_rejection_rejects(alice):
    pause = routed_pause(alice, **TWO_PEOPLE)
    ann, ben = approvers("ann", "ben")
    assert resume(ann, pause).status_code == 202
    rejected = resume(ben, pause, verdict="REJECTED", note="no")
    assert rejected.status_code == 200
    assert Pause.objects.get(pk=pause.pk).verdict == "REJECTED"


@pytest.mark.django_db
def test_a_vote_approves_as_asked_an_edit_is_refused(alice):
    pause = routed_pause(alice, **TWO_PEOPLE)
    (ann,) = approvers("ann")
    refused = resume(ann, pause, toolDecisions={"call-1": {"verdict": "APPROVED"}})
    assert refused.status_code == 400
    assert not Vote.objects.filter(pause=pause).exists()


@pytest.mark.django_db
def test_routing_and_quorum_together_count_only_routed_people(alice):
    pause = routed_pause(alice, approvers={"groups": ["finance"]}, requiredApprovals=2)
    fred, fay = approver_in("fred", "finance"), approver_in("fay", "finance")
    (olga,) = approvers("olga")
    assert resume(olga, pause).status_code == 403  # not routed: no vote at all
    assert resume(fred, pause).status_code == 202
    assert resume(fay, pause).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_n_plus_one_concurrent_votes_decide_once():
    alice = make_user("alice")
    pause = routed_pause(alice, requiredApprovals=3)
    people = approvers("v1", "v2", "v3", "v4")
    start = threading.Barrier(len(people))
    answers: dict[str, int] = {}

    def vote(user) -> None:
        try:
            start.wait()
            answers[user.username] = resume(user, pause).status_code
        finally:
            close_old_connections()

    threads = [threading.Thread(target=vote, args=(user,)) for user in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(answers.values()) == [200, 202, 202, 409], answers  # two votes, one decision, one too late
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").count() == 1
    assert Vote.objects.filter(pause=pause).count() == 3
    assert Pause.objects.get(pk=pause.pk).status != PauseStatus.PENDING


@pytest.mark.django_db
def test_the_timeout_policy_decides_at_the_deadline_whatever_the_votes(alice):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.timers import fire_timeout

    pause = routed_pause(alice, requiredApprovals=2, timeoutPolicy="AUTO_REJECT", approvalTimeout="PT5M")
    (ann,) = approvers("ann")
    assert resume(ann, pause).status_code == 202
    fire_timeout(str(pause.pk), now=timezone.now() + timedelta(minutes=6))
    decided = Pause.objects.get(pk=pause.pk)
    assert decided.verdict == "REJECTED" and decided.decided_by == "system:timeout"


@pytest.mark.django_db
def test_a_restored_pause_gathers_its_quorum_again(alice, settings):
    from approvals.decisions import restore_pause

    settings.HITL_CONTINUE_INLINE = False  # the continuation is queued: the pause stays RESOLVING
    pause = routed_pause(alice, requiredApprovals=2)
    ann, ben, cy = approvers("ann", "ben", "cy")
    assert resume(ann, pause).status_code == 202
    assert resume(ben, pause).status_code == 200
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING

    assert restore_pause(pause_id=pause.pk, reason="its worker died")
    assert not Vote.objects.filter(pause=pause).exists()
    restored = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.restored")
    assert restored.detail["votesCleared"] == 2
    assert resume(cy, pause).status_code == 202  # one approval of two again, not a decision


@pytest.mark.django_db
def test_the_admin_inbox_shows_the_votes_so_far_and_the_page_says_who_approved(alice):
    from tests.approvals.test_admin_inbox import INBOX, logged_in, page

    pause = routed_pause(alice, requiredApprovals=2)
    ann, ben = approvers("ann", "ben")
    assert resume(ann, pause).status_code == 202
    listed = logged_in(ben).get(INBOX).content.decode()
    assert '<span class="hitl-reason-votes">1 of 2 approvals: ann</span>' in listed
    opened = logged_in(ann).get(page(pause)).content.decode()
    assert "1 of 2 approvals: ann, " in opened and 'id="hitl-approved-already"' in opened
    assert 'id="hitl-approve"' not in opened  # ann has approved: she may still reject
    assert 'id="hitl-reject"' in opened
    response = logged_in(ben).post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    assert response.status_code == 302
    assert Pause.objects.get(pk=pause.pk).decided_by == "ben"


@pytest.mark.django_db
def test_a_reviewer_routing_leaves_out_sees_why_in_the_admin(alice):
    from tests.approvals.test_admin_inbox import INBOX, logged_in, page

    pause = routed_pause(alice, approvers={"groups": ["finance"]})
    (olga,) = approvers("olga")
    assert str(pause.pk) not in logged_in(olga).get(INBOX).content.decode()
    opened = logged_in(olga).get(page(pause)).content.decode()
    assert 'id="hitl-not-routed"' in opened and "routed to group finance" in opened
    assert 'id="hitl-approve"' not in opened
    refused = logged_in(olga).post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING and refused.status_code == 403
