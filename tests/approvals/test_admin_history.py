"""The "Decided approvals" history in Django admin: scope, "decided by me", one
subject's pauses, the automated badge, read-only, and a bounded number of queries.

Its 404s and the bulk pages' ones: test_admin_history_errors.py; its query plans: test_admin_history_plan.py.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import Pause, PauseStatus
from conversations.models import Agent
from tests.approvals.test_admin_inbox import listed, logged_in, page, paused_pause, rows, staff

pytestmark = pytest.mark.django_db

HISTORY = "/admin/approvals/decidedapproval/"
EVERYONE = {"decided_by": "all"}


def decided(
    owner: User | None,
    count: int,
    *,
    by: User | None = None,
    actor: str = "",
    verdict: str = "APPROVED",
    status: str = PauseStatus.RESOLVED,
    **fields,
) -> list[Pause]:
    """``count`` pauses decided by ``by`` (or the system ``actor``), the newest decision last."""
    made = rows(owner, count, status=status, verdict=verdict, **fields)
    now = timezone.now()
    for i, pause in enumerate(made):
        pause.decided_by = actor or (by.username if by else "")
        pause.decided_by_user = by
        pause.automated = actor.startswith("system:")
        pause.decided_at = now - timedelta(minutes=count - i)
    Pause.objects.bulk_update(made, ["decided_by", "decided_by_user", "automated", "decided_at"])
    return made


# --- who sees what --------------------------------------------------------------------------------


def test_an_approver_sees_every_decided_pause_and_a_staff_owner_only_their_own(approver, admin_user):
    carol, dave = staff("carol"), staff("dave")
    carols, daves = decided(carol, 2, by=approver), decided(dave, 3, by=approver)
    for user in (approver, admin_user):
        assert listed(logged_in(user).get(HISTORY, EVERYONE)) == {p.pk for p in carols + daves}
    assert listed(logged_in(carol).get(HISTORY, EVERYONE)) == {p.pk for p in carols}
    assert listed(logged_in(dave).get(HISTORY, {**EVERYONE, "q": str(carols[0].subject_id)})) == set()


def test_a_plain_user_has_no_access_and_staff_find_it_on_the_admin_index(alice, approver):
    decided(alice, 1, by=approver)
    response = logged_in(alice).get(HISTORY, EVERYONE)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    index = logged_in(staff("carol")).get("/admin/").content.decode()
    assert f'href="{HISTORY}"' in index and "Decided approvals" in index


def test_decided_by_me_is_the_default_and_everyone_i_may_see_is_one_click_away(approver):
    rita = staff("rita")
    rita.groups.set(approver.groups.all())
    owner = staff("carol")
    mine, hers = decided(owner, 2, by=approver), decided(owner, 2, by=rita)
    timed_out = decided(owner, 1, actor="system:timeout", verdict="REJECTED")
    client = logged_in(approver)
    response = client.get(HISTORY)
    assert listed(response) == {p.pk for p in mine}
    assert [p.pk for p in response.context["cl"].result_list] == [mine[1].pk, mine[0].pk]  # newest first
    html = response.content.decode()
    assert 'href="?decided_by=all"' in html and "Everyone I may see" in html
    assert listed(client.get(HISTORY, EVERYONE)) == {p.pk for p in mine + hers + timed_out}


def test_the_history_lists_no_pending_pause_one_subjects_lists_all_its_pauses(approver):
    owner = staff("carol")
    subject = uuid.uuid4()
    first = decided(owner, 1, by=approver)[0]
    cancelled = decided(owner, 1, by=approver, verdict="CANCELLED", status=PauseStatus.CANCELLED)[0]
    pending = rows(owner, 1)[0]
    Pause.objects.filter(pk__in=[first.pk, cancelled.pk, pending.pk]).update(subject_id=subject)
    other = decided(owner, 1, by=approver)[0]  # another conversation
    client = logged_in(approver)
    assert listed(client.get(HISTORY, EVERYONE)) == {first.pk, cancelled.pk, other.pk}
    response = client.get(HISTORY, {**EVERYONE, "subject": str(subject)})
    assert listed(response) == {first.pk, cancelled.pk, pending.pk}
    assert response.context["cl"].result_list[0].pk == pending.pk  # what still waits is on top
    html = response.content.decode()
    assert "waiting" in html and "CANCELLED" in html
    assert f"All pauses of conversation {subject}" in html


# --- columns --------------------------------------------------------------------------------------


def test_each_row_says_when_who_verdict_note_and_opens_the_decision_page(approver):
    agent = Agent.objects.create(name="account-bot")
    pause = decided(staff("carol"), 1, by=approver, agent_id=agent.pk, agent_version=3, note="ok by phone")[0]
    html = logged_in(approver).get(HISTORY).content.decode()
    assert f'<a href="{page(pause)}" class="hitl-history-open">' in html
    assert f'title="{pause.subject_id}">{str(pause.subject_id)[:8]}…' in html
    assert "account-bot v3" in html
    assert 'class="hitl-time"' in html and "min ago" in html  # the shared time format
    assert 'title="ok by phone"' in html and 'title="needs a look"' in html  # clamped, whole on hover
    assert ">APPROVED<" in html and ">approver<" in html and ">by approver<" in html
    assert 'class="hitl-actor-kind hitl-actor-person"' in html
    assert "approvals/hitl_times.js" in html


def test_a_timeout_is_badged_automated_and_the_filter_tells_them_apart(approver):
    owner = staff("carol")
    person = decided(owner, 1, by=approver)[0]
    timeout = decided(owner, 1, actor="system:timeout", verdict="REJECTED")[0]
    client = logged_in(approver)
    html = client.get(HISTORY, EVERYONE).content.decode()
    assert 'class="hitl-actor-kind hitl-actor-automated"' in html and "system:timeout" in html
    assert '<img src="/static/admin/img/icon-no.svg"' not in html  # no red ✖ that reads as "failed"
    assert listed(client.get(HISTORY, {**EVERYONE, "automated": "yes"})) == {timeout.pk}
    assert listed(client.get(HISTORY, {**EVERYONE, "automated": "no"})) == {person.pk}


def test_filters_by_verdict_and_decided_date_and_search_by_reason_or_short_id(approver):
    owner = staff("carol")
    approved = decided(owner, 1, by=approver, reason="refund over the limit")[0]
    rejected = decided(owner, 1, by=approver, verdict="REJECTED")[0]
    old = decided(owner, 1, by=approver)[0]
    Pause.objects.filter(pk=old.pk).update(decided_at=timezone.now() - timedelta(days=40))
    client = logged_in(approver)
    assert listed(client.get(HISTORY, {"verdict": "REJECTED"})) == {rejected.pk}
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)  # the filter's "Today"
    since = {"decided_at__gte": str(today), "decided_at__lt": str(today + timedelta(days=1))}
    assert listed(client.get(HISTORY, since)) == {approved.pk, rejected.pk}
    assert listed(client.get(HISTORY, {"q": "refund"})) == {approved.pk}
    assert listed(client.get(HISTORY, {"q": str(rejected.subject_id)[:8]})) == {rejected.pk}


def test_a_decided_pause_opens_on_its_decision_page_with_its_outcome_and_history_link(alice, approver):
    pause = paused_pause(alice)
    client = logged_in(approver)
    client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", "note": "fine"})
    response = client.get(HISTORY)
    assert listed(response) == {pause.pk}
    opened = client.get(page(pause))
    html = opened.content.decode()
    assert opened.status_code == 200 and "APPROVED by approver" in html
    link = f'href="{HISTORY}?subject={pause.subject_id}&amp;decided_by=all" id="hitl-subject-history"'
    assert link in html and "All pauses of this conversation (history)" in html
    assert listed(client.get(HISTORY, {"subject": str(pause.subject_id), **EVERYONE})) == {pause.pk}


# --- read-only, and a fixed number of queries -----------------------------------------------------


def test_the_history_is_read_only(admin_user, approver):
    pause = decided(staff("carol"), 1, by=approver)[0]
    client = logged_in(admin_user)
    response = client.get(HISTORY, EVERYONE)
    assert response.context["action_form"] is None and f"{HISTORY}add/" not in response.content.decode()
    assert client.get(f"{HISTORY}add/").status_code == 403
    assert client.post(f"{HISTORY}{pause.pk}/delete/", {"post": "yes"}).status_code == 403
    opened = client.get(f"{HISTORY}{pause.pk}/change/")  # its own page is the decision page
    assert opened.status_code == 302 and opened["Location"] == page(pause)
    assert Pause.objects.filter(pk=pause.pk, status=PauseStatus.RESOLVED).exists()


@pytest.mark.parametrize("role", ["approver", "owner-staff"])
def test_the_history_renders_with_a_bounded_number_of_queries(role, approver, django_assert_max_num_queries):
    carol = staff("carol")
    reviewer = approver if role == "approver" else carol
    owners = [staff(f"owner{i}") for i in range(5)] if role == "approver" else [carol]
    client = logged_in(reviewer)
    for owner in owners:
        decided(owner, 1, by=reviewer, agent_id=Agent.objects.create(name=f"bot of {owner.username}").pk)
    client.get(HISTORY)
    with django_assert_max_num_queries(9) as few:
        assert listed(client.get(HISTORY))
    for i, owner in enumerate(owners * 12):
        agent_id = Agent.objects.create(name=f"agent {i}").pk
        decided(owner, 1, by=reviewer, agent_id=agent_id, note=f"note {i}")
        decided(owner, 1, actor="system:timeout", agent_id=agent_id)
    for params in ({}, EVERYONE, {"q": "agent"}, {"subject": str(Pause.objects.first().subject_id)}):
        # a search adds its two look-ups (approvals.admin.search), a subject its visibility check
        extra = 2 if "q" in params else 1 if "subject" in params else 0
        with django_assert_max_num_queries(len(few.captured_queries) + extra):
            response = client.get(HISTORY, {**params, **EVERYONE} if params else params)
            assert listed(response)
    newest = f"agent {len(owners) * 12 - 1} v?"
    assert newest in client.get(HISTORY, EVERYONE).content.decode()  # named in the same queries


def test_the_pager_stops_counting_at_its_cap_and_says_more_than(approver, monkeypatch):
    from approvals.admin import history  # local import: the cap under test

    monkeypatch.setattr(history, "COUNT_CAP", 5)
    decided(staff("carol"), 7, by=approver)
    client = logged_in(approver)
    html = client.get(HISTORY).content.decode()
    assert "more than 5 decided approvals" in html
    assert "7 decided approvals" not in client.get(HISTORY, {"verdict": "REJECTED"}).content.decode()
    assert "0 decided approvals" in client.get(HISTORY, {"verdict": "REJECTED"}).content.decode()
