"""S1, the authorization matrix of Slack's buttons: who clicks (unsigned, a Slack user not allowed, an
allowed one) × what (a conversation's pause, a discussion's, an approval request's card) × its state
(pending, decided), requests signed with slack_sdk's signing; expected outcomes from the one table
(harnesses/authz_table.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from approvals.models import Pause, PauseStatus
from groups.demo_group import demo_member_document
from groups.store import create_group
from harnesses.authz_table import differing, expected
from harnesses.factories import deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from tests.approval_requests.conftest import filing
from tests.slack_surface.conftest import SIGNING_SECRET, answer_in_slack, click_body, signed_headers

CLICKERS = {"other": "UNOTLISTED", "approver": "UAPPROVER"}  # "anonymous": an unsigned click


def _subject(kind: str, state: str, integration: Any, bob: Any, admin: Any) -> str:
    if kind == "approval request":
        service = client_for(make_user(f"bot-{uuid.uuid4().hex[:8]}", "agent"))
        filed = service.post("/approval-requests", filing(f"slack/{uuid.uuid4()}"), format="json").json()
        if state == "decided":
            admin.post(f"/approval-requests/{filed['id']}/decision", {"verdict": "REJECTED"}, format="json")
        return f"request:{filed['id']}"
    if kind == "conversation":
        subject_id = paused_conversation(bob, integration.agent_id)
        if state == "decided":
            admin.post(f"/agents/{subject_id}/resume", {"verdict": "REJECTED"}, format="json")
        return subject_id
    scribe = deployed_agent(demo_member_document("scribe", "Noted."))
    group = create_group(
        document={
            "name": "gated",
            "members": [{"agentId": scribe}],
            "phases": [{"name": "Opinions", "type": "OPINION", "requiresApproval": True}],
        }
    )
    started = bob.post(f"/groups/{group.group_id}/conversations", {"question": "Ship?"}, format="json").json()
    if state == "decided":
        admin.post(
            f"/groups/{group.group_id}/conversations/{started['discussionId']}/approve?wait=60",
            {"decision": {"verdict": "REJECTED"}},
            format="json",
        )
    return f"group:{started['discussionId']}"


def _click(client: Any, role: str, subject: str, fake_slack: Any) -> Any:
    body = click_body(f"acme|{subject}", user=CLICKERS.get(role, "UAPPROVER"))
    headers = signed_headers(body, secret=SIGNING_SECRET) if role != "anonymous" else {}
    told = len(fake_slack.calls)
    response = client.post(
        "/integrations/slack/interactive",
        data=body,
        content_type="application/x-www-form-urlencoded",
        **headers,
    )
    if response.status_code != 200:
        return response.status_code
    answer_in_slack()  # what the q-cluster posts after the answer
    refused = any("is not authorized" in str(c["args"]) for c in fake_slack.calls[told:])
    return 403 if refused else "ok"


@pytest.mark.django_db
@pytest.mark.usefixtures("continuations_queued")
def test_slack_button_authorization_matrix_matches_the_docs_in_every_cell(
    integration, fake_slack, anon_client, capsys
):
    bob, admin = client_for(make_user("bob")), client_for(make_user("admin", "admin"))
    cells = []
    for kind in ("conversation", "discussion", "approval request"):
        for state in ("pending", "decided"):
            for role in ("anonymous", "other", "approver"):
                subject = _subject(kind, state, integration, bob, admin)
                pause = Pause.objects.filter(subject_id=subject.split(":")[-1]).latest("paused_at")
                got = _click(anon_client, role, subject, fake_slack)
                now = Pause.objects.get(pk=pause.pk)
                if state == "pending" and (now.status != PauseStatus.PENDING) != (got == "ok"):
                    got = f"{got}, but the pause is {now.status}"
                if state == "pending" and got == "ok" and now.decided_by != f"slack:{CLICKERS[role]}":
                    got = f"decided by {now.decided_by}"
                cells.append(
                    {
                        "surface": "Slack",
                        "endpoint": f"button on {'an' if kind[0] in 'aeiou' else 'a'} {kind}",
                        "state": state,
                        "role": role,
                        "expected": expected("slack button", role, state),
                        "got": got,
                    }
                )
    # a click signed with another secret is no click at all
    forged = click_body(f"acme|{_subject('conversation', 'pending', integration, bob, admin)}")
    status = anon_client.post(
        "/integrations/slack/interactive",
        data=forged,
        content_type="application/x-www-form-urlencoded",
        **signed_headers(forged, secret="not-the-signing-secret"),
    ).status_code
    cells.append(_forged(status))

    wrong = differing(cells)
    with capsys.disabled():
        print(f"\nS1 Slack matrix: {len(cells)} cells run, {len(cells) - len(wrong)} matching")
    assert wrong == [], "\n".join(wrong)


def _forged(status: int) -> dict[str, Any]:
    return {
        "surface": "Slack",
        "endpoint": "button, signed with another secret",
        "state": "pending",
        "role": "approver",
        "expected": 401,
        "got": status,
    }
