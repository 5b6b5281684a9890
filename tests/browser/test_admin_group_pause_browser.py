"""A reviewer in a real browser decides a group discussion's TASK pause task by task."""

from __future__ import annotations

import re

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
from groups.models import GroupConversation
from harnesses.members import discuss, echoing, group
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_rejects_one_task_approves_another_and_sees_the_discussion_go_on(live_server, page):
    alice = make_user("alice")
    make_user("rita", "approver")
    worker = echoing("worker")
    group_id = group(
        [(worker, "Writer")],
        [
            {"name": "Ideas", "type": "OPINION"},
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "intro", "description": "write the intro", "assignee": worker},
                    {"id": "summary", "description": "write the summary", "assignee": worker},
                ],
            },
        ],
        hitlConfig={"granularity": "TASK", "onTaskRejection": "FAIL"},
    )
    body = discuss(client_for(alice), group_id, "Draft the release notes")
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"])
    assert pause.kind == "TASK" and pause.status == PauseStatus.PENDING

    admin_login(page, live_server.url, "rita", "pw-rita")
    page.get_by_role("link", name="Pending approvals").first.click()
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    row = page.locator("#result_list tbody tr", has=page.locator(f'[title="{pause.subject_id}"]'))
    assert "TASK" in row.inner_text() and "phase 1: Build (EXECUTE), 2 task(s) awaiting" in row.inner_text()
    row.locator(f'a[href$="/{pause.pk}/change/"]').click()
    page.wait_for_url(re.compile(rf"/admin/approvals/pendingapproval/{pause.pk}/change/$"))

    section = page.locator("#hitl-kind-section").inner_text()
    assert "Build (EXECUTE), index 1" in section and "FAIL: it fails" in section
    assert "Phase: Ideas (OPINION)" in page.locator("#hitl-transcript").inner_text()
    intro, summary = (
        page.locator('.hitl-item[data-key="intro"]'),
        page.locator('.hitl-item[data-key="summary"]'),
    )
    assert "write the intro" in intro.inner_text() and "Your task (intro)" in intro.inner_text()
    intro.locator("select").select_option("REJECTED")
    summary.locator("select").select_option("APPROVED")
    page.fill("#id_note", "The intro misses the upgrade steps")
    save_screenshot(page, "admin-decision-group-task.png", for_docs=True)

    page.click("#hitl-approve")
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    message = page.locator(".messagelist").inner_text()
    assert f"Approved: discussion {pause.subject_id}. It has continued." in message
    assert (
        "The discussion is now COMPLETED (phase 1); tasks of Build: intro FAILED, summary COMPLETED."
        in message
    )
    assert page.locator(f'#result_list [title="{pause.subject_id}"]').count() == 0

    discussion = GroupConversation.objects.get(pk=body["discussionId"])
    tasks = {task["id"]: task for task in discussion.tasks}
    assert discussion.state == "COMPLETED"
    assert (tasks["intro"]["status"], tasks["intro"]["note"]) == (
        "FAILED",
        "The intro misses the upgrade steps",
    )
    assert tasks["summary"]["status"] == "COMPLETED"
    entry = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    assert (entry.actor, entry.detail["taskApprovals"]) == (
        "rita",
        {"intro": "REJECTED", "summary": "APPROVED"},
    )
    assert run_queued_tasks() == 0  # the reviewer's request ran the continuation
