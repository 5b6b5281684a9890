"""The "Pending approvals" inbox in Django admin: listing, filters, search, query bound, decisions, bulk.

Tool-call pauses on the decision page: test_admin_tool_call_page.py."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Agent
from harnesses.factories import deployed_agent, paused_conversation, store_tool_batch
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

INBOX = "/admin/approvals/pendingapproval/"
BULK = "/admin/approvals/pendingapproval/bulk-decide/"


def page(pause: Pause) -> str:
    return f"{INBOX}{pause.pk}/change/"


def staff(username: str) -> User:
    """A staff member with no HITL role: sees and decides only their own conversations' pauses."""
    user = make_user(username)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rows(owner: User | None, count: int, **fields) -> list[Pause]:
    now = timezone.now()
    defaults = {
        "surface": "regular",
        "kind": "RULE",
        "subject_type": "conversation",
        "reason": "needs a look",
    }
    return Pause.objects.bulk_create(
        [
            Pause(
                **{**defaults, **fields},
                subject_id=uuid.uuid4(),
                owner=owner,
                paused_at=now - timedelta(minutes=count - i),
            )
            for i in range(count)
        ]
    )


def listed(response) -> set[uuid.UUID]:
    assert response.status_code == 200, response.content[:500]
    return {pause.pk for pause in response.context["cl"].result_list}


def paused_pause(owner: User, agent_id: str | None = None) -> Pause:
    conversation_id = paused_conversation(client_for(owner), agent_id)
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def snapshot(owner: User, pause: Pause) -> dict:
    return client_for(owner).get(f"/agents/{pause.subject_id}").json()


def make_tool_call_pause(
    pause: Pause, calls: list[dict] | None = None, *, outcome_unknown=None, executed_ungated=None
) -> Pause:
    calls = (
        calls
        if calls is not None
        else [
            {
                "callId": "call-1",
                "toolName": "transfer_funds",
                "source": "http",
                "arguments": {"amount": 250, "iban": "DE** redacted **"},
                "gateReason": "transfer_*",
                "matchedRule": "transfer_*",
                "request": {"method": "POST", "url": "https://payments.example/transfers"},
            },
            {
                "callId": "call-2",
                "toolName": "send_email",
                "source": "builtin",
                "arguments": {"to": "a@example.org"},
                "gateReason": "send_*",
            },
        ]
    )
    return store_tool_batch(pause, calls, outcome_unknown=outcome_unknown, executed_ungated=executed_ungated)


# --- who sees what --------------------------------------------------------------------------------


def test_admins_and_approvers_see_every_pending_pause_oldest_first(admin_user, approver):
    carol, dave = staff("carol"), staff("dave")
    mine, theirs = rows(carol, 2), rows(dave, 3)
    rows(dave, 1, status=PauseStatus.RESOLVING)
    rows(carol, 1, status=PauseStatus.CANCELLED)
    for user in (admin_user, approver):
        response = logged_in(user).get(INBOX)
        assert listed(response) == {p.pk for p in mine + theirs}
        shown = list(response.context["cl"].result_list)
        assert [p.paused_at for p in shown] == sorted(p.paused_at for p in shown)


def test_other_staff_see_only_their_own_conversations_pauses():
    carol, dave = staff("carol"), staff("dave")
    mine, theirs = rows(carol, 2), rows(dave, 3)
    assert listed(logged_in(carol).get(INBOX)) == {p.pk for p in mine}
    assert listed(logged_in(dave).get(INBOX)) == {p.pk for p in theirs}


def test_non_staff_are_sent_to_the_admin_login(alice):
    rows(alice, 1)
    response = logged_in(alice).get(INBOX)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_the_admin_index_offers_pending_approvals_to_staff():
    response = logged_in(staff("carol")).get("/admin/")
    assert response.status_code == 200
    assert "Pending approvals" in response.content.decode()


def test_the_inbox_shows_what_a_reviewer_needs_per_row(approver):
    carol = staff("carol")
    now = timezone.now()
    agent_id = uuid.uuid4()
    (soon,) = rows(
        carol,
        1,
        reason="Refund over the limit",
        agent_id=agent_id,
        agent_version=3,
        due_at=now + timedelta(minutes=14, seconds=30),
        timeout_policy="AUTO_REJECT",
        kind="TOOL_CALL",
        tool_names=["refund", "notify"],
    )
    (late,) = rows(carol, 1, reason="Late one", due_at=now - timedelta(minutes=5))
    html = logged_in(approver).get(INBOX).content.decode().replace("\xa0", " ")
    for text in (
        str(soon.subject_id),
        str(agent_id)[:8],
        "v3",
        "carol",
        "TOOL_CALL",
        "Refund over the limit",
        "refund, notify",
        "in 14 min",
        "AUTO_REJECT",
        "Late one",
        "OVERDUE",
        "overdue by 5",
    ):
        assert text in html, text
    assert page(soon) in html and page(late) in html
    assert "Add pending approval" not in html


# --- filters, search, paging, the query bound -----------------------------------------------------


def test_filters_by_pause_type_agent_owner_and_overdue(approver):
    carol, dave = staff("carol"), staff("dave")
    agent_a, agent_b = Agent.objects.create(name="refund-bot").pk, Agent.objects.create(name="mail-bot").pk
    now = timezone.now()
    rule_a = rows(carol, 2, agent_id=agent_a, due_at=now + timedelta(hours=1))
    tool_b = rows(dave, 1, agent_id=agent_b, kind="TOOL_CALL", due_at=now - timedelta(minutes=1))
    forever = rows(dave, 1, agent_id=agent_b)
    client = logged_in(approver)
    assert listed(client.get(INBOX, {"type": "TOOL_CALL"})) == {p.pk for p in tool_b}
    assert listed(client.get(INBOX, {"agent": str(agent_a)})) == {p.pk for p in rule_a}
    assert listed(client.get(INBOX, {"owner": str(dave.pk)})) == {p.pk for p in tool_b + forever}
    assert listed(client.get(INBOX, {"overdue": "yes"})) == {p.pk for p in tool_b}
    assert listed(client.get(INBOX, {"overdue": "no"})) == {p.pk for p in rule_a + forever}
    html = client.get(INBOX).content.decode()
    # the sidebar lists agents by name (and short id) and owners
    assert f"?agent={agent_a}" in html and f"refund-bot ({str(agent_a)[:8]})" in html and "dave" in html


def test_the_owner_filter_offers_only_owners_the_reviewer_may_see():
    carol, dave = staff("carol"), staff("dave")
    rows(carol, 1)
    rows(dave, 1)
    response = logged_in(carol).get(INBOX)
    owner_filter = next(spec for spec in response.context["cl"].filter_specs if spec.title == "owner")
    assert [title for _value, title in owner_filter.lookup_choices] == ["carol"]


def test_search_by_reason_owner_conversation_and_pause_id(approver):
    carol, dave = staff("carol"), staff("dave")
    (refund,) = rows(carol, 1, reason="Refund over the limit")
    (deletion,) = rows(dave, 1, reason="Account deletion")
    client = logged_in(approver)
    assert listed(client.get(INBOX, {"q": "refund"})) == {refund.pk}
    assert listed(client.get(INBOX, {"q": "dave"})) == {deletion.pk}
    assert listed(client.get(INBOX, {"q": str(refund.subject_id)})) == {refund.pk}
    assert listed(client.get(INBOX, {"q": str(deletion.pk)})) == {deletion.pk}
    assert listed(client.get(INBOX, {"q": str(uuid.uuid4())})) == set()


def test_search_never_widens_a_staff_members_scope():
    carol, dave = staff("carol"), staff("dave")
    (theirs,) = rows(dave, 1, reason="Refund over the limit")
    client = logged_in(carol)
    assert listed(client.get(INBOX, {"q": "refund"})) == set()
    assert listed(client.get(INBOX, {"q": str(theirs.subject_id)})) == set()


def test_the_inbox_is_paginated_by_50(approver):
    rows(staff("carol"), 120)
    client = logged_in(approver)
    assert len(listed(client.get(INBOX))) == 50
    assert len(listed(client.get(INBOX, {"p": "3"}))) == 20


@pytest.mark.parametrize("role", ["approver", "owner-staff"])
def test_the_inbox_renders_with_a_bounded_number_of_queries(role, approver, django_assert_max_num_queries):
    carol = staff("carol")
    owners = [staff(f"owner{i}") for i in range(5)] if role == "approver" else [carol]
    reviewer = approver if role == "approver" else carol
    client = logged_in(reviewer)
    for owner in owners:
        agent_id = Agent.objects.create(name=f"bot of {owner.username}").pk
        rows(owner, 1, agent_id=agent_id, due_at=timezone.now() + timedelta(minutes=5))
    client.get(INBOX)
    with django_assert_max_num_queries(9) as few:
        assert listed(client.get(INBOX, {"overdue": "no"}))
    for i, owner in enumerate(owners * 12):
        agent_id = Agent.objects.create(name=f"agent {i}").pk
        rows(owner, 1, agent_id=agent_id, kind="TOOL_CALL", tool_names=["a", "b"])
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(INBOX)
        assert len(listed(response)) == min(50, len(owners) * 13)
    assert "agent 0 v?" in response.content.decode()  # every row named, in the same number of queries
    # a search adds one look-up (the users and the agents its words match, one UNION: approvals.admin.lookups)
    with django_assert_max_num_queries(len(few.captured_queries) + 1):
        assert listed(client.get(INBOX, {"q": "agent"}))


# --- the decision page ----------------------------------------------------------------------------


def test_the_decision_page_shows_reason_actions_and_latest_turns(alice, approver):
    pause = paused_pause(alice)
    html = logged_in(approver).get(page(pause)).content.decode()
    assert "Account deletion requires manager sign-off" in html
    assert "PAUSE_CONVERSATION" in html and "confirm_deletion" in html
    assert "please delete my account" in html  # the paused turn's input
    assert f'name="expected_pause_id" value="{pause.pk}"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert 'value="APPROVED"' in html and 'value="REJECTED"' in html


def test_the_decision_page_shows_at_most_the_last_five_turns(alice, approver):
    from conversations.models import ConversationStep

    pause = paused_pause(alice)
    last = ConversationStep.objects.filter(conversation_id=pause.subject_id).order_by("-index").first()
    ConversationStep.objects.filter(pk=last.pk).update(index=100)
    for i in range(7):  # older turns, before the paused one
        ConversationStep.objects.create(
            conversation_id=pause.subject_id, index=10 + i, input=f"older turn {i}", output=[f"answer {i}"]
        )
    response = logged_in(approver).get(page(pause))
    turns = response.context["turns"]
    assert [t["input"] for t in turns] == [f"older turn {i}" for i in range(3, 7)] + [
        "please delete my account"
    ]


def test_approve_from_the_decision_page_continues_the_conversation(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(
        page(pause),
        {
            "expected_pause_id": str(pause.pk),
            "verdict": "APPROVED",
            "note": "checked with the manager",
        },
    )
    assert response.status_code == 302 and response["Location"] == INBOX
    pause.refresh_from_db()
    # the reviewer's own process ran the continuation: nothing was queued for the q-cluster
    assert (pause.status, pause.verdict, pause.decided_by, pause.note) == (
        "RESOLVED",
        "APPROVED",
        "approver",
        "checked with the manager",
    )
    entry = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    assert (entry.actor, entry.verdict, entry.note) == ("approver", "APPROVED", "checked with the manager")
    assert run_queued_tasks() == 0
    after = snapshot(alice, Pause.objects.get(pk=pause.pk))
    assert after["state"] == "READY" and after["output"] == ["Deletion APPROVED."]


def test_reject_with_a_note_posts_the_note_to_the_conversation(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(
        page(pause),
        {
            "expected_pause_id": str(pause.pk),
            "verdict": "REJECTED",
            "note": "not without a ticket",
        },
    )
    assert response.status_code == 302
    assert run_queued_tasks() == 0  # continued by the reviewer's process
    assert snapshot(alice, pause)["output"] == [
        "This action was rejected by a human reviewer. Reason: not without a ticket"
    ]


def test_a_stale_page_says_who_decided_and_changes_nothing(alice, approver, admin_user):
    pause = paused_pause(alice)
    stale_form = {"expected_pause_id": str(pause.pk), "verdict": "REJECTED", "note": "too late"}
    assert (
        client_for(approver)
        .post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
        .status_code
        == 200
    )
    response = logged_in(admin_user).post(page(pause), stale_form)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Already decided (APPROVED)" in html and "by approver at" in html and "Nothing was changed" in html
    assert 'id="hitl-approve"' not in html  # no form to submit again
    pause.refresh_from_db()
    assert (pause.verdict, pause.decided_by, pause.note) == ("APPROVED", "approver", "")
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").count() == 1


def test_opening_a_decided_pause_shows_the_decision_without_a_form(alice, approver):
    pause = paused_pause(alice)
    client_for(approver).post(
        f"/agents/{pause.subject_id}/resume", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    response = logged_in(approver).get(page(pause))
    html = response.content.decode()
    assert response.status_code == 200 and "Rejected by approver at " in html and "Note: “no”" in html
    assert 'id="hitl-stale"' not in html  # nothing was submitted: no "nothing was changed"
    assert 'id="hitl-decision-form"' in html and 'id="hitl-approve"' not in html
    # the approver who decided it reads the turns up to the decision; any other approver none of them
    assert response.context["turns_until"] == Pause.objects.get(pk=pause.pk).decided_at
    assert logged_in(make_user("approver2", "approver")).get(page(pause)).context["turns"] is None


def test_a_race_lost_inside_the_service_is_reported_as_already_decided(alice, approver, monkeypatch):
    from approvals.admin import decision as admin_decision

    pause = paused_pause(alice)
    real = admin_decision.decide_and_continue

    def someone_else_first(**kwargs):
        client_for(approver).post(
            f"/agents/{pause.subject_id}/resume", {"verdict": "REJECTED"}, format="json"
        )
        return real(**kwargs)

    monkeypatch.setattr(admin_decision, "decide_and_continue", someone_else_first)
    response = logged_in(make_user("admin2", "admin")).post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"}
    )
    assert response.status_code == 409
    assert "Already decided (REJECTED) by approver" in response.content.decode()


def test_a_form_for_another_pause_decides_nothing(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(
        page(pause), {"expected_pause_id": str(uuid.uuid4()), "verdict": "APPROVED"}
    )
    assert response.status_code == 409
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_a_too_long_note_is_refused_by_the_service_and_kept_on_the_form(alice, approver):
    pause = paused_pause(alice)
    note = "x" * 4096 + "y"
    response = logged_in(approver).post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", "note": note}
    )
    assert response.status_code == 200
    assert "exceeds the maximum length of 4096 characters" in response.content.decode()
    assert response.context["form"]["note"].value() == note
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert not AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").exists()


def test_a_post_without_a_verdict_is_kept_on_the_form(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(page(pause), {"expected_pause_id": str(pause.pk), "note": "hm"})
    assert response.status_code == 200 and "Choose Approve or Reject." in response.content.decode()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_an_undeployed_agent_is_reported_and_the_pause_stays_pending(alice, approver):
    from conversations.agents import undeploy_agent

    pause = paused_pause(alice)
    undeploy_agent(agent_id=pause.agent_id, version=pause.agent_version, environment="production")
    response = logged_in(approver).post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"}
    )
    assert response.status_code == 409 and "Agent not deployed" in response.content.decode()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


# --- bulk -----------------------------------------------------------------------------------------


def select(client: Client, action: str, pauses: list[Pause], **kwargs):
    return client.post(
        INBOX, {"action": action, "_selected_action": [str(p.pk) for p in pauses], "index": "0"}, **kwargs
    )


def test_bulk_approve_of_three_rule_pauses_decides_and_audits_each(alice, approver):
    agent_id = deployed_agent()
    pauses = [paused_pause(alice, agent_id) for _ in range(3)]
    client = logged_in(approver)
    confirmation = select(client, "approve_selected", pauses)
    assert confirmation.status_code == 200
    html = confirmation.content.decode()
    assert "Approve 3 rule pause(s)?" in html and all(str(p.subject_id) in html for p in pauses)
    assert Pause.objects.filter(status=PauseStatus.PENDING).count() == 3  # nothing decided yet
    response = client.post(
        BULK,
        {"verdict": "APPROVED", "note": "batch ok", "pause_ids": [str(p.pk) for p in pauses]},
        follow=True,
    )
    assert "Approved 3 pause(s), each audited on its own" in response.content.decode()
    entries = AuditEntry.objects.filter(verb="hitl.approval", pause_id__in=[p.pk for p in pauses])
    assert sorted((e.pause_id, e.actor, e.verdict, e.note) for e in entries) == sorted(
        (p.pk, "approver", "APPROVED", "batch ok") for p in pauses
    )
    assert len({e.subject_id for e in entries}) == 3  # one entry in each conversation's own chain
    assert run_queued_tasks() == 3
    assert all(snapshot(alice, p)["output"] == ["Deletion APPROVED."] for p in pauses)


def test_bulk_reject_posts_the_one_note_to_each(alice, approver):
    agent_id = deployed_agent()
    pauses = [paused_pause(alice, agent_id) for _ in range(2)]
    logged_in(approver).post(
        BULK, {"verdict": "REJECTED", "note": "policy", "pause_ids": [str(p.pk) for p in pauses]}
    )
    run_queued_tasks()
    for pause in pauses:
        assert snapshot(alice, pause)["output"] == [
            "This action was rejected by a human reviewer. Reason: policy"
        ]


def test_bulk_excludes_tool_call_pauses_open_each_to_decide_it(alice, approver):
    agent_id = deployed_agent()
    rule_pauses = [paused_pause(alice, agent_id) for _ in range(2)]
    tool_pause = make_tool_call_pause(paused_pause(alice, agent_id))
    client = logged_in(approver)
    confirmation = select(client, "approve_selected", [*rule_pauses, tool_pause])
    html = confirmation.content.decode()
    assert "Approve 2 rule pause(s)?" in html
    assert "open each to decide it" in html and page(tool_pause) in html
    assert confirmation.context["to_decide"] == rule_pauses
    assert [p.pk for p in confirmation.context["excluded"]] == [tool_pause.pk]
    assert f'name="pause_ids" value="{tool_pause.pk}"' not in html
    # Even a hand-made POST naming it does not decide it.
    response = client.post(
        BULK,
        {"verdict": "APPROVED", "pause_ids": [str(p.pk) for p in [*rule_pauses, tool_pause]]},
        follow=True,
    )
    assert "only rule pauses are decided in bulk" in response.content.decode()
    assert Pause.objects.get(pk=tool_pause.pk).status == PauseStatus.PENDING
    assert {Pause.objects.get(pk=p.pk).status for p in rule_pauses} == {PauseStatus.RESOLVING}


def test_bulk_with_only_tool_call_pauses_offers_nothing_to_confirm(alice, approver):
    tool_pause = make_tool_call_pause(paused_pause(alice))
    html = select(logged_in(approver), "reject_selected", [tool_pause]).content.decode()
    assert "None of the selected pauses can be decided in bulk." in html and 'id="hitl-bulk-form"' not in html


def test_bulk_reports_a_pause_decided_meanwhile_and_decides_the_rest(alice, approver):
    agent_id = deployed_agent()
    first, second = paused_pause(alice, agent_id), paused_pause(alice, agent_id)
    client_for(alice).post(f"/agents/{first.subject_id}/resume", {"verdict": "REJECTED"}, format="json")
    response = logged_in(approver).post(
        BULK, {"verdict": "APPROVED", "pause_ids": [str(first.pk), str(second.pk)]}, follow=True
    )
    html = response.content.decode()
    assert "Approved 1 pause(s)" in html and "already decided (REJECTED) by alice" in html
    assert Pause.objects.get(pk=first.pk).verdict == "REJECTED"
    assert Pause.objects.get(pk=second.pk).verdict == "APPROVED"


def test_bulk_refuses_a_too_long_note_before_deciding_anything(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(
        BULK, {"verdict": "APPROVED", "note": "n" * 4097, "pause_ids": [str(pause.pk)]}
    )
    assert response.status_code == 400
    assert "exceeds the maximum length" in response.content.decode()
    assert response.context["note"] == "n" * 4097
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_bulk_selection_is_capped(approver):
    pauses = rows(staff("carol"), 101)
    response = select(logged_in(approver), "approve_selected", pauses)
    assert response.status_code == 400
    html = response.content.decode()
    assert "select at most 100 pauses" in html and 'id="hitl-bulk-form"' not in html
    assert Pause.objects.filter(status=PauseStatus.PENDING).count() == 101


def test_bulk_confirmation_of_more_than_100_pauses_is_refused_whole_not_cut_to_100(approver):
    pauses = rows(staff("carol"), 101)
    response = logged_in(approver).post(
        BULK, {"verdict": "APPROVED", "pause_ids": [str(p.pk) for p in pauses]}
    )
    assert response.status_code == 400
    assert "select at most 100 pauses" in response.content.decode()
    assert Pause.objects.filter(status=PauseStatus.PENDING).count() == 101


# --- the access matrix ----------------------------------------------------------------------------

ROLES = ["admin", "approver", "owner-staff", "other-staff", "non-staff-owner"]


def reviewer(role: str, owner: User) -> User:
    return {
        "admin": lambda: make_user("boss", "admin"),
        "approver": lambda: make_user("reviewer", "approver"),
        "owner-staff": lambda: owner,
        "other-staff": lambda: staff("mallory"),
        "non-staff-owner": lambda: owner,
    }[role]()


def owner_for(role: str) -> User:
    return make_user("owner") if role == "non-staff-owner" else staff("owner")


EXPECTED = {  # role: (listed, decision page, decides, bulk decides)
    "admin": (True, 200, True, True),
    "approver": (True, 200, True, True),
    "owner-staff": (True, 200, True, True),
    "other-staff": (False, 404, False, False),
    "non-staff-owner": (False, 302, False, False),
}


@pytest.mark.parametrize("role", ROLES)
def test_access_matrix_for_listing_and_the_decision_page(role):
    owner = owner_for(role)
    pause = paused_pause(owner)
    client = logged_in(reviewer(role, owner))
    is_listed, page_status, _decides, _bulk = EXPECTED[role]
    response = client.get(INBOX)
    if page_status == 302:
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    else:
        assert (pause.pk in listed(response)) is is_listed
    assert client.get(page(pause)).status_code == page_status


@pytest.mark.parametrize("role", ROLES)
def test_access_matrix_for_deciding_one_pause(role):
    owner = owner_for(role)
    pause = paused_pause(owner)
    client = logged_in(reviewer(role, owner))
    _listed, page_status, decides, _bulk = EXPECTED[role]
    response = client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    assert response.status_code == (302 if decides else page_status)
    if page_status == 302:
        assert "/admin/login/" in response["Location"]
    assert (Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED) is decides  # continued by the page


@pytest.mark.parametrize("role", ROLES)
def test_access_matrix_for_bulk_decisions(role):
    owner = owner_for(role)
    pause = paused_pause(owner)
    client = logged_in(reviewer(role, owner))
    *_rest, bulk_decides = EXPECTED[role]
    action = select(client, "approve_selected", [pause])
    if (
        role == "other-staff"
    ):  # someone else's pause cannot be selected: the styled 404 (test_admin_history_errors)
        assert action.status_code == 404 and 'id="hitl-not-found"' in action.content.decode()
    elif bulk_decides:
        assert action.status_code == 200 and str(pause.subject_id) in action.content.decode()
    response = client.post(BULK, {"verdict": "APPROVED", "pause_ids": [str(pause.pk)]})
    assert response.status_code == (404 if role == "other-staff" else 302)
    assert (Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING) is bulk_decides


def test_an_unknown_pause_id_is_404_for_everyone(approver):
    client = logged_in(approver)
    assert client.get(f"{INBOX}{uuid.uuid4()}/change/").status_code == 404
    assert client.get(f"{INBOX}not-a-uuid/change/").status_code == 404


@pytest.mark.parametrize("url", ["add/", "{pk}/delete/"])
def test_nobody_adds_or_deletes_pauses_here(admin_user, alice, url):
    pause = paused_pause(alice)
    response = logged_in(admin_user).post(INBOX + url.format(pk=pause.pk), {"post": "yes"})
    assert response.status_code == 403
    assert Pause.objects.filter(pk=pause.pk, status=PauseStatus.PENDING).exists()


def test_the_changelist_offers_no_delete_action(admin_user):
    response = logged_in(admin_user).get(INBOX)
    actions = [name for name, _label in response.context["action_form"].fields["action"].choices]
    assert "delete_selected" not in actions
    assert {"approve_selected", "reject_selected"} <= set(actions)
