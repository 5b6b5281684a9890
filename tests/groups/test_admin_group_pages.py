"""Group pauses in the admin inbox: the list, and the decision page of PHASE and TASK pauses (the
discussion, its phase and transcript, a verdict per awaiting task), deciding through the same service
and validation as POST /groups/{id}/conversations/{id}/approve. Discussions are real: started through
the REST API with deterministic member agents, paused at their real gates."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
from groups.models import GroupConversation
from harnesses.factories import paused_conversation
from harnesses.members import answering, discuss, echoing, group
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

INBOX = "/admin/approvals/pendingapproval/"
HIDDEN = "Hidden: approvers read the discussion only while it is waiting for a decision."


def task_discussion(owner: User, *, on_rejection: str = "RETRY", **hitl: Any) -> dict[str, Any]:
    """A discussion paused at a TASK gate (phase 1) with two results awaiting approval (tasks a and b)."""
    worker = echoing("worker")
    group_id = group(
        [(worker, "Worker")],
        [
            {"name": "Ideas", "type": "OPINION"},
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "a", "description": "write the intro", "assignee": worker},
                    {"id": "b", "description": "write the summary", "assignee": worker},
                ],
            },
        ],
        hitlConfig={"granularity": "TASK", "onTaskRejection": on_rejection, **hitl},
    )
    body = discuss(client_for(owner), group_id, "Draft the release notes")
    assert body["state"] == "AWAITING_APPROVAL", body
    return body


def phase_discussion(owner: User) -> dict[str, Any]:
    pat = answering("pat", "Ship it.")
    group_id = group(
        [(pat, "Optimist")],
        [
            {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
            {"name": "Decision", "type": "SYNTHESIS"},
        ],
    )
    body = discuss(client_for(owner), group_id)
    assert body["state"] == "AWAITING_APPROVAL", body
    return body


def pause_of(body: dict[str, Any]) -> Pause:
    return Pause.objects.get(
        subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"], status=PauseStatus.PENDING
    )


def page(pause: Pause) -> str:
    return f"{INBOX}{pause.pk}/change/"


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def task_fields(response) -> dict[str, str]:
    """Task id -> the name of its verdict field on the page's form."""
    form = response.context["form"]
    return {item.key: form.item_field(item.key) for item in form.items}


def approve_rest(reviewer: User, body: dict[str, Any], decision: dict[str, Any]) -> Any:
    url = f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait=60"
    return client_for(reviewer).post(url, decision, format="json")


def discussion(body: dict[str, Any]) -> GroupConversation:
    return GroupConversation.objects.get(pk=body["discussionId"])


# --- the inbox ------------------------------------------------------------------------------------


def test_the_inbox_lists_group_pauses_with_kind_group_and_phase_and_filters_them(alice, approver):
    one_to_one = Pause.objects.get(subject_id=paused_conversation(client_for(alice)))
    tasks, phase = task_discussion(alice), phase_discussion(alice)
    task_pause, phase_pause = pause_of(tasks), pause_of(phase)
    client = logged_in(approver)

    html = client.get(INBOX).content.decode()
    for text in (
        "TASK",
        "PHASE",
        tasks["groupId"][:8],
        phase["groupId"][:8],
        "phase 1: Build (EXECUTE), 2 task(s) awaiting",
        "phase 0: Opinions (OPINION)",
        f'discussion <span title="{tasks["discussionId"]}">',
    ):
        assert text in html, text

    def listed(**query: str) -> set:
        response = client.get(INBOX, query)
        assert response.status_code == 200
        return {p.pk for p in response.context["cl"].result_list}

    assert listed() == {one_to_one.pk, task_pause.pk, phase_pause.pk}
    assert listed(surface="group") == {task_pause.pk, phase_pause.pk}
    assert listed(surface="regular") == {one_to_one.pk}
    assert listed(type="TASK") == {task_pause.pk}
    assert listed(type="PHASE", surface="group") == {phase_pause.pk}
    assert listed(q=tasks["groupId"]) == {task_pause.pk}
    assert listed(q=phase["discussionId"]) == {phase_pause.pk}


def test_a_group_row_names_its_group_and_what_the_phase_produced(alice, approver):
    phase = pause_of(phase_discussion(alice))
    tasks = pause_of(task_discussion(alice))
    client = logged_in(approver)
    html = client.get(INBOX).content.decode()
    asked = "“panel” finished phase “Opinions” (OPINION): 1 contribution to review"
    assert f'<span class="hitl-reason" title="{asked}"' in html
    assert "“panel”, phase “Build” (EXECUTE): 2 tasks to review" in html
    assert f'<span class="hitl-group" title="{phase.group_id}">panel</span>' in html  # not an id prefix
    assert "alice · panel</span>" in html  # who asked, and the group, under the headline
    opened = client.get(page(phase)).content.decode()
    assert f'<h1 id="hitl-reason">{asked}</h1>' in opened
    assert phase.reason == "Requires human approval (PHASE) — phase: Opinions"  # the API's reason stays
    assert tasks.details["groupName"] == "panel" and tasks.details["produced"] == "2 tasks"


def test_group_rows_add_no_query_per_row(alice, approver, django_assert_max_num_queries):
    pause_of(task_discussion(alice))
    client = logged_in(approver)
    client.get(INBOX)
    with django_assert_max_num_queries(9) as few:
        assert len(client.get(INBOX).context["cl"].result_list) == 1
    one_row = len(few.captured_queries)  # now: the discussions below overflow Django's query log
    for _ in range(3):
        pause_of(task_discussion(alice))
        pause_of(phase_discussion(alice))
    with django_assert_max_num_queries(one_row):
        html = client.get(INBOX).content.decode()
    assert html.count("task(s) awaiting") == 4 and html.count("(OPINION)</td>") == 3


# --- the decision page: what it shows -------------------------------------------------------------


def test_a_task_pause_page_shows_the_group_phase_each_awaiting_task_and_the_transcript(alice, approver):
    body = task_discussion(alice, timeoutPolicy="AUTO_REJECT", approvalTimeout="PT30M")
    pause = pause_of(body)

    response = logged_in(approver).get(page(pause))

    assert response.status_code == 200
    html = response.content.decode()
    for text in (
        '<h1 id="hitl-reason">“panel”, phase “Build” (EXECUTE): 2 tasks to review</h1>',  # what is asked
        "Requires human approval (TASK) — phase: Build",  # the stored reason, among the details
        "panel (" + body["groupId"] + ")",  # the group, by name
        "Build (EXECUTE), index 1",
        "AUTO_REJECT after PT30M",
        'data-deadline="1">in 29 min</time>',  # the live time format (approvals.admin.times)
        "Draft the release notes",  # the question
        "RETRY: it goes back to its assignee with your note and runs again",
        "Tasks awaiting approval",
        "write the intro",
        "write the summary",
        "Worker (",  # the assignee by role, then its agent id
        "Your task (a): write the intro",  # a's result: the echoing member said its prompt
        "Your task (b): write the summary",
        "Discussion transcript (every entry)",
        "Phase: Ideas (OPINION)",  # what the member said in the transcript: its prompt, echoed
        'name="csrfmiddlewaretoken"',
        f'name="expected_pause_id" value="{pause.pk}"',
        "Approve: continue with these task verdicts",
        "Reject: fail the discussion",
    ):
        assert text in html, text
    assert set(task_fields(response)) == {"a", "b"}
    for name in task_fields(response).values():
        assert f'name="{name}"' in html
    assert response.context["turns"] is None  # the section's transcript replaces the latest turns


def test_a_phase_pause_page_has_no_per_task_fields_and_approving_runs_the_rest(alice, approver):
    body = phase_discussion(alice)
    pause = pause_of(body)
    client = logged_in(approver)

    response = client.get(page(pause))

    html = response.content.decode()
    assert response.status_code == 200
    assert "Opinions (OPINION), index 0" in html and "Ship it." in html
    assert response.context["form"].items == [] and 'name="item_' not in html
    assert "Tasks awaiting approval" not in html and "On a rejected task" not in html
    assert "Approve: continue the discussion" in html

    decided = client.post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"}, follow=True
    )

    assert decided.redirect_chain == [(INBOX, 302)]
    assert f"Approved: discussion {pause.subject_id}. It has continued. The discussion is now COMPLETED" in (
        decided.content.decode()
    )
    assert discussion(body).state == "COMPLETED"
    assert run_queued_tasks() == 0  # the reviewer's request ran the continuation


# --- deciding per task ----------------------------------------------------------------------------


def test_per_task_verdicts_reach_the_discussion_and_the_page_says_its_new_state(alice, approver):
    body = task_discussion(alice, on_rejection="RETRY")
    pause = pause_of(body)
    client = logged_in(approver)
    fields = task_fields(client.get(page(pause)))

    decided = client.post(
        page(pause),
        {
            "expected_pause_id": str(pause.pk),
            "verdict": "APPROVED",
            "note": "cite your sources",
            fields["a"]: "REJECTED",
            fields["b"]: "",  # same as the decision: approved
        },
        follow=True,
    )

    assert decided.redirect_chain == [(INBOX, 302)]
    pause.refresh_from_db()
    assert (pause.status, pause.verdict, pause.decided_by) == ("RESOLVED", "APPROVED", "approver")
    assert pause.decision_details == {"taskApprovals": {"a": "REJECTED", "b": "APPROVED"}}
    entry = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    assert entry.detail["taskApprovals"] == {"a": "REJECTED", "b": "APPROVED"}
    tasks = {t["id"]: t for t in discussion(body).tasks}
    assert tasks["b"]["status"] == "COMPLETED"
    # RETRY: a went back to its assignee with the note, ran again, and waits at the next gate
    assert tasks["a"]["status"] == "AWAITING_APPROVAL" and "cite your sources" in tasks["a"]["result"]
    assert discussion(body).state == "AWAITING_APPROVAL"
    assert (
        "The discussion is now AWAITING_APPROVAL (phase 1); tasks of Build: a AWAITING_APPROVAL, b COMPLETED."
        in decided.content.decode()
    )
    again = pause_of(body)
    assert again.pk != pause.pk and again.details["awaitingTaskIds"] == ["a"]
    assert again.pk in {p.pk for p in decided.context["cl"].result_list}  # back in the inbox
    assert run_queued_tasks() == 0


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "MAYBE",
            "Invalid taskApprovals value for 'a': expected APPROVED or REJECTED (case-insensitive), got 'MAYBE'",
        ),
        ("", None),  # the control: the same post with a valid value decides
    ],
)
def test_a_bad_task_verdict_is_refused_on_the_form_and_the_pause_stays_pending(alice, approver, value, error):
    body = task_discussion(alice)
    pause = pause_of(body)
    client = logged_in(approver)
    fields = task_fields(client.get(page(pause)))
    before = discussion(body).tasks

    response = client.post(
        page(pause),
        {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", "note": "kept", fields["a"]: value},
    )

    if error is None:
        assert response.status_code == 302
        assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
        return
    assert response.status_code == 200
    assert response.context["form"].errors[fields["a"]] == [error]
    assert error.replace("'", "&#x27;") in response.content.decode()
    assert response.context["form"]["note"].value() == "kept"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert not AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").exists()
    assert discussion(body).state == "AWAITING_APPROVAL" and discussion(body).tasks == before


def test_a_task_no_longer_awaiting_is_refused_by_the_service_as_rest_refuses_it(alice, approver):
    body = task_discussion(alice)
    pause = pause_of(body)
    client = logged_in(approver)
    fields = task_fields(client.get(page(pause)))
    row = discussion(body)
    row.tasks = [t | {"status": "COMPLETED"} if t["id"] == "a" else t for t in row.tasks]
    row.save(update_fields=["tasks"])

    response = client.post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", fields["a"]: "APPROVED"}
    )

    assert response.status_code == 200
    assert response.context["form"].errors[fields["a"]] == [
        "Task 'a' is not awaiting approval (status: COMPLETED)"
    ]
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    rest = approve_rest(
        approver, body, {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"a": "APPROVED"}}
    )
    assert rest.status_code == 400 and "Task 'a' is not awaiting approval" in rest.content.decode()


def test_reject_fails_the_whole_discussion(alice, approver):
    body = task_discussion(alice)
    pause = pause_of(body)

    decided = logged_in(approver).post(
        page(pause),
        {"expected_pause_id": str(pause.pk), "verdict": "REJECTED", "note": "start over"},
        follow=True,
    )

    assert discussion(body).state == "FAILED"
    assert (
        "Rejected: discussion" in decided.content.decode()
        and "The discussion is now FAILED (phase 1)" in decided.content.decode()
        and "rejected by approver: start over" in decided.content.decode()
    )


# --- decided, stale, refused ----------------------------------------------------------------------


def test_a_decided_group_pause_shows_as_decided_and_a_stale_post_changes_nothing(alice, approver, admin_user):
    body = task_discussion(alice, on_rejection="FAIL")
    pause = pause_of(body)
    client = logged_in(approver)
    fields = task_fields(client.get(page(pause)))
    assert approve_rest(admin_user, body, {"decision": {"verdict": "APPROVED"}}).status_code == 200

    opened = client.get(page(pause))
    stale = client.post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "REJECTED", fields["a"]: "REJECTED"}
    )

    html = opened.content.decode()
    assert opened.status_code == 200 and "Approved by admin at " in html and 'id="hitl-stale"' not in html
    assert 'id="hitl-approve"' not in html and 'name="item_' not in html
    assert (
        HIDDEN in html and "Your task (a)" not in html and "Phase: Ideas" not in html
    )  # only while it waits
    assert stale.status_code == 409 and "Already decided (APPROVED) by admin" in stale.content.decode()
    pause.refresh_from_db()
    assert (pause.verdict, pause.decided_by, pause.decision_details) == ("APPROVED", "admin", {})
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").count() == 1
    assert discussion(body).state == "COMPLETED"
    assert "Your task (a)" in logged_in(admin_user).get(page(pause)).content.decode()  # admins always may


def test_a_race_lost_inside_the_service_is_reported_as_already_decided(alice, approver, monkeypatch):
    from approvals.admin import decision as admin_decision

    body = task_discussion(alice)
    pause = pause_of(body)
    real = admin_decision.decide_and_continue

    def someone_else_first(**kwargs):
        assert approve_rest(approver, body, {"decision": {"verdict": "REJECTED"}}).status_code == 200
        return real(**kwargs)

    monkeypatch.setattr(admin_decision, "decide_and_continue", someone_else_first)
    response = logged_in(make_user("admin2", "admin")).post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"}
    )

    assert response.status_code == 409
    assert "Already decided (REJECTED) by approver" in response.content.decode()
    assert discussion(body).state == "FAILED"


def test_non_staff_are_sent_to_login_and_other_staff_get_404(alice):
    body = task_discussion(alice)
    pause = pause_of(body)
    carol = make_user("carol")
    carol.is_staff = True
    carol.save(update_fields=["is_staff"])
    form = {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"}

    for user in (alice, make_user("dave")):  # the owner, and anyone else, not staff
        for response in (logged_in(user).get(page(pause)), logged_in(user).post(page(pause), form)):
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert logged_in(carol).get(page(pause)).status_code == 404  # staff, not the owner: no such pause
    assert logged_in(carol).post(page(pause), form).status_code == 404
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_a_post_without_the_csrf_token_is_refused(alice, approver):
    pause = pause_of(task_discussion(alice))
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)

    response = client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})

    assert response.status_code == 403
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_the_owner_may_only_cancel_when_self_approval_is_off(settings):
    settings.HITL_ALLOW_SELF_APPROVAL = False
    owner = make_user("olga", "approver")
    body = task_discussion(owner)
    pause = pause_of(body)
    client = logged_in(owner)

    opened = client.get(page(pause))
    refused = client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})

    html = opened.content.decode()
    assert "You may only cancel this pause" in html and 'name="item_' not in html
    assert f"/groups/{body['groupId']}/conversations/{body['discussionId']}/cancel" in html
    assert refused.status_code == 403
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
