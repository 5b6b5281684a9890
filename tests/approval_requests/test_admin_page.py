"""Approval requests in the admin: their inbox rows, their decision page, and every answer posted from it
(approve, reject, edit and approve, reply with guidance, cancel) through the core, with its refusals."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approval_requests.models import ApprovalRequest
from approvals.admin.edit_form import EDIT_NEEDS_ITS_BUTTON, NOTHING_EDITED
from approvals.admin.responses import NO_GUIDANCE_HERE
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.self_approval import SELF_APPROVAL_DETAIL
from harnesses.users import client_for, make_user
from tests.approval_requests.conftest import PINNED, file_request
from tests.approvals.test_admin_inbox import INBOX, listed, logged_in, page, rows, staff
from tests.approvals.test_admin_inbox_queries import BUDGET

pytestmark = pytest.mark.django_db

HISTORY = "/admin/approvals/decidedapproval/"
ARGUMENTS_JSON = '{\n  "orderId": "A-1",\n  "amount": 250\n}'
AMENDED_BODY = '{"orderId":"A-1","amount":100}'


def filed_pause(agent: User, **overrides) -> tuple[dict, Pause]:
    filed = file_request(agent, **overrides)
    return filed, Pause.objects.get(subject_id=filed["id"])


def read(agent: User, filed: dict) -> dict:
    return client_for(agent).get(f"/approval-requests/{filed['id']}").json()


def decide(client, pause: Pause, verdict: str, **fields):
    return client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": verdict, **fields})


def edit_fields(arguments: str = ARGUMENTS_JSON, url: str = PINNED["url"], body: str = PINNED["body"]):
    return {"edit_0": arguments, "edit_1": url, "edit_2": body}


def text_of(response) -> str:
    return html.unescape(response.content.decode())


def approvals_of(pause: Pause):
    return AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval")


def still_pending(pause: Pause, filed: dict) -> bool:
    pause.refresh_from_db()
    request = ApprovalRequest.objects.get(pk=filed["id"])
    return pause.status == PauseStatus.PENDING and request.status == "PENDING" and not approvals_of(pause)


# --- the inbox ------------------------------------------------------------------------------------


def test_an_approval_request_shows_as_such_in_the_inbox(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    conversation_pause = rows(staff("carol"), 1)[0]
    client = logged_in(approver)
    response = client.get(INBOX)
    assert listed(response) == {pause.pk, conversation_pause.pk}
    body = text_of(response)
    assert f'request <span title="{filed["id"]}">{filed["id"][:8]}…</span>' in body
    assert "refund → POST https://payments.example/refunds" in body
    assert ">refund-bot</span>" in body
    assert "approval requests" in body  # the surface filter's choice
    assert listed(client.get(INBOX, {"surface": "request"})) == {pause.pk}
    assert listed(client.get(INBOX, {"surface": "regular"})) == {conversation_pause.pk}
    assert listed(client.get(INBOX, {"type": "ACTION"})) == {pause.pk}


def test_an_approval_request_is_found_by_its_reason_and_its_id(agent, approver):
    filed, pause = filed_pause(agent)
    rows(staff("carol"), 1)
    client = logged_in(approver)
    assert listed(client.get(INBOX, {"q": "over 100"})) == {pause.pk}
    assert listed(client.get(INBOX, {"q": filed["id"][:8]})) == {pause.pk}
    assert listed(client.get(INBOX, {"q": "nothing like it"})) == set()


def test_approval_request_rows_read_nothing_per_row(agent, approver):
    """The agent's name and the request line come with the row: the inbox stays within its budget."""
    client = logged_in(approver)
    client.get(INBOX)  # the session's first use is not what is measured
    counts = []
    for batch in range(2):
        for number in range(1 + batch * 10):
            file_request(agent, key=f"run-{batch}/{number}", request=PINNED)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(INBOX, {"surface": "request"})
        assert response.status_code == 200
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1] <= BUDGET, counts


def test_an_unpinned_request_shows_its_action_alone(agent, approver):
    filed_pause(agent)
    body = text_of(logged_in(approver).get(INBOX))
    assert "refund → " not in body and ">refund<" in body.replace("\n", "")


# --- the decision page ----------------------------------------------------------------------------


def test_the_page_shows_what_is_asked_and_every_answer(agent, approver):
    make_user("alice")
    context = {"messages": [{"role": "user", "content": "refund my order A-1 please"}]}
    filed, pause = filed_pause(agent, request=PINNED, onBehalfOf="alice", context=context)
    response = logged_in(approver).get(page(pause))
    assert response.status_code == 200
    body = text_of(response)
    for fact in ("Refund over 100 EUR", "refund-bot", "alice", filed["id"], "pinned: it is granted only"):
        assert fact in body
    assert "<th>Agent</th><td>refund-bot</td>" in body and "<th>Action</th><td>refund</td>" in body
    # each argument on its own line, as JSON
    assert '<tr><td><pre>orderId</pre></td><td><pre>"A-1"</pre></td></tr>' in body
    assert "<tr><td><pre>amount</pre></td><td><pre>250</pre></td></tr>" in body
    # the request as it will be sent: every byte, the secret header by its name only
    request_block = re.search(r'id="hitl-block-request">(.*?)</div>', body, re.S).group(1)
    assert (
        "POST https://payments.example/refunds\nContent-Type: application/json\n"
        "Authorization: [hidden: marked secret by the agent]\n\n" + PINNED["body"]
    ) in request_block
    assert "sk-live" not in body
    assert "refund my order A-1 please" in re.search(
        r'id="hitl-block-context">(.*?)</div>', body, re.S
    ).group(1)
    for element in (
        "hitl-approve",
        "hitl-reject",
        "hitl-edit-approve",
        "hitl-guidance-form",
        "hitl-cancel-form",
        "hitl-outlook-edit",
    ):
        assert f'id="{element}"' in body, element
    assert 'id="hitl-latest-turns"' not in body  # an approval request has no turns
    assert "All pauses of this approval request" in body


# --- the answers ----------------------------------------------------------------------------------


def test_approve_grants_the_request_as_filed(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    client = logged_in(approver)
    response = decide(client, pause, "APPROVED", **edit_fields())
    assert response.status_code == 302 and response["Location"] == INBOX
    message = str(list(client.get(INBOX).context["messages"])[0])
    assert message.startswith(f"Approved: approval request {filed['id']}.")
    assert "The approval request is now APPROVED: the agent may claim it once" in message
    body = read(agent, filed)
    assert body["status"] == "APPROVED" and body["decision"]["decidedBy"] == "approver"
    assert "amendedArguments" not in body["decision"]
    assert body["grant"]["arguments"] == {"orderId": "A-1", "amount": 250}
    assert approvals_of(pause).get().actor == "approver"


def test_reject_with_a_note(agent, approver):
    filed, pause = filed_pause(agent)
    response = decide(logged_in(approver), pause, "REJECTED", note="Not for this customer.")
    assert response.status_code == 302
    body = read(agent, filed)
    assert body["status"] == "REJECTED"
    assert (body["decision"]["verdict"], body["decision"]["note"]) == ("REJECTED", "Not for this customer.")
    assert body["grant"] is None


def test_edit_and_approve_grants_the_edited_arguments_and_request(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    client = logged_in(approver)
    amended = '{"orderId": "A-1", "amount": 100}'
    response = decide(
        client, pause, "EDIT_AND_APPROVE", note="Only 100.", **edit_fields(amended, body=AMENDED_BODY)
    )
    assert response.status_code == 302, text_of(response)[:2000]
    message = str(list(client.get(INBOX).context["messages"])[0])
    assert message.startswith("Edited and approved: approval request")
    body = read(agent, filed)
    assert body["decision"]["amendedArguments"] == {"orderId": "A-1", "amount": 100}
    assert body["decision"]["amendedRequest"] == {"body": AMENDED_BODY}  # the URL was left as shown
    assert body["grant"]["arguments"] == {"orderId": "A-1", "amount": 100}
    assert body["grant"]["request"]["body"] == AMENDED_BODY
    # the agent may send only the edited request
    claim = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert claim.json()["code"] == "REQUEST_CHANGED"
    edited = {**PINNED, "body": AMENDED_BODY}
    claim = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": edited}, format="json"
    )
    assert claim.status_code == 200, claim.content
    client_for(agent).post(
        f"/approval-requests/{filed['id']}/outcome",
        {"status": "succeeded", "httpStatus": 201, "summary": "refunded 100"},
        format="json",
    )

    decided = text_of(client.get(page(pause)))
    assert "Approved with an edit by approver at " in decided and 'id="hitl-stale"' not in decided
    assert "Arguments: as filed and as approved" in decided
    assert (
        "<tr><td><pre>amount</pre></td><td><pre>250</pre></td><td><pre>100</pre></td><td><pre>changed</pre>"
        in decided
    )
    assert "Request as approved" in decided and AMENDED_BODY in decided
    assert "claimed at" in decided and "succeeded (HTTP 201)" in decided and "refunded 100" in decided
    assert 'id="hitl-edit-approve"' not in decided and 'name="edit_0"' not in decided


def test_an_unpinned_request_edits_its_arguments_only(agent, approver):
    filed, pause = filed_pause(agent)
    form = logged_in(approver).get(page(pause)).context["form"]
    assert [name for name in form.fields if name.startswith("edit_")] == ["edit_0"]
    response = decide(
        logged_in(approver), pause, "EDIT_AND_APPROVE", edit_0='{"orderId": "A-1", "amount": 90, "memo": "x"}'
    )
    assert response.status_code == 302
    assert read(agent, filed)["grant"]["arguments"] == {"orderId": "A-1", "amount": 90, "memo": "x"}


def test_reply_with_guidance_rejects_with_the_guidance(agent, approver):
    filed, pause = filed_pause(agent)
    response = logged_in(approver).post(
        page(pause),
        {"expected_pause_id": str(pause.pk), "hitl_action": "respond", "guidance": "Refund 100 instead."},
    )
    assert response.status_code == 302
    body = read(agent, filed)
    assert body["status"] == "REJECTED" and body["decision"]["guidance"] == "Refund 100 instead."
    assert approvals_of(pause).get().detail["reviewerAction"] == "reply_with_guidance"


def test_cancel_ends_the_request_cancelled_after_a_confirmation(agent, approver):
    filed, pause = filed_pause(agent)
    client = logged_in(approver)
    body = {"expected_pause_id": str(pause.pk), "hitl_action": "cancel"}
    asked = client.post(page(pause), body)
    assert asked.status_code == 200 and "it ends CANCELLED without a decision" in text_of(asked)
    assert still_pending(pause, filed)
    done = client.post(page(pause), {**body, "confirm": "yes"})
    assert done.status_code == 302
    assert read(agent, filed)["status"] == "CANCELLED"
    entry = approvals_of(pause).get()
    assert (entry.verdict, entry.detail["reviewerAction"]) == ("CANCELLED", "cancel_request")


# --- refusals: shown at the top and beside the field, the input kept, nothing decided ----------


def test_bad_json_is_refused_beside_the_arguments_keeping_the_input(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    typed = '{"orderId": "A-1", "amount": 100,}'
    response = decide(logged_in(approver), pause, "EDIT_AND_APPROVE", **edit_fields(typed))
    assert response.status_code == 200
    body = text_of(response)
    assert "Nothing was decided." in body
    summary = re.search(r'class="errorlist hitl-edit-error-summary">(.*?)</ul>', body, re.S).group(1)
    assert "Arguments (JSON): is not valid JSON (line 1, column 34)" in summary
    row = re.search(r'id="hitl-edit-row-arguments">(.*?)</tr>', body, re.S).group(1)
    assert typed in row and "is not valid JSON" in row
    assert still_pending(pause, filed)


def test_an_edited_request_the_validator_refuses_is_shown_beside_its_input(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    response = decide(
        logged_in(approver), pause, "EDIT_AND_APPROVE", **edit_fields(url="ftp://payments.example/refunds")
    )
    assert response.status_code == 200
    row = re.search(r'id="hitl-edit-row-url">(.*?)</tr>', text_of(response), re.S).group(1)
    assert "ftp://payments.example/refunds" in row and 'class="errorlist"' in row
    assert still_pending(pause, filed)


@pytest.mark.parametrize("verdict", ["APPROVED", "REJECTED"])
def test_approve_or_reject_never_takes_an_edit(agent, approver, verdict):
    filed, pause = filed_pause(agent, request=PINNED)
    response = decide(logged_in(approver), pause, verdict, **edit_fields(body=AMENDED_BODY))
    assert response.status_code == 200
    row = re.search(r'id="hitl-edit-row-body">(.*?)</tr>', text_of(response), re.S).group(1)
    assert EDIT_NEEDS_ITS_BUTTON in row and AMENDED_BODY in row
    assert still_pending(pause, filed)


def test_edit_and_approve_with_nothing_edited_is_refused(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED)
    relaid = json.dumps({"amount": 250, "orderId": "A-1"})  # the same value, laid out otherwise
    response = decide(logged_in(approver), pause, "EDIT_AND_APPROVE", **edit_fields(relaid))
    assert response.status_code == 200 and NOTHING_EDITED in text_of(response)
    assert still_pending(pause, filed)


def test_a_request_that_allows_no_edits_offers_none_and_refuses_one(agent, approver):
    filed, pause = filed_pause(agent, request=PINNED, hitlConfig={"allowEdit": False})
    client = logged_in(approver)
    body = text_of(client.get(page(pause)))
    assert 'id="hitl-edit-approve"' not in body and 'name="edit_0"' not in body
    assert "does not allow edits" in re.search(r'id="hitl-edit-none">(.*?)</p>', body, re.S).group(1)
    forged = decide(client, pause, "EDIT_AND_APPROVE", **edit_fields(body=AMENDED_BODY))
    assert forged.status_code == 200 and "Nothing was decided." in text_of(forged)
    assert still_pending(pause, filed)
    # REST refuses the same edit, in the ACTION validator's words
    rest = client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision",
        {"verdict": "APPROVED", "amendedRequest": {"body": AMENDED_BODY}},
        format="json",
    )
    assert rest.status_code == 400 and "does not allow edits" in rest.json()["detail"]


def test_a_request_that_allows_no_reply_offers_no_guidance_and_refuses_one(agent, approver):
    filed, pause = filed_pause(agent, hitlConfig={"allowRespond": False})
    client = logged_in(approver)
    assert 'id="hitl-guidance-form"' not in text_of(client.get(page(pause)))
    forged = client.post(
        page(pause), {"expected_pause_id": str(pause.pk), "hitl_action": "respond", "guidance": "try again"}
    )
    assert forged.status_code == 400 and NO_GUIDANCE_HERE in text_of(forged)
    assert still_pending(pause, filed)


def test_the_person_it_is_for_may_not_approve_it_when_self_approval_is_off(agent, approver):
    filed, pause = filed_pause(agent, onBehalfOf="approver", hitlConfig={"allowSelfApproval": False})
    client = logged_in(approver)
    body = text_of(client.get(page(pause)))
    assert 'id="hitl-only-cancel"' in body and 'id="hitl-approve"' not in body
    assert f"POST /approval-requests/{filed['id']}/cancel" in body
    refused = decide(client, pause, "EDIT_AND_APPROVE", edit_0='{"amount": 1}')
    assert refused.status_code == 403 and SELF_APPROVAL_DETAIL in text_of(refused)
    assert still_pending(pause, filed)


def test_a_page_left_open_while_the_request_was_decided_changes_nothing(agent, approver, admin_user):
    filed, pause = filed_pause(agent, request=PINNED)
    client_for(admin_user).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    response = decide(logged_in(approver), pause, "EDIT_AND_APPROVE", **edit_fields(body=AMENDED_BODY))
    assert response.status_code == 409 and 'id="hitl-stale"' in text_of(response)
    assert read(agent, filed)["status"] == "REJECTED" and approvals_of(pause).count() == 1


# --- who may use it -------------------------------------------------------------------------------


def test_only_approvers_and_admins_reach_an_approval_request(agent, admin_user):
    filed, pause = filed_pause(agent)
    carol = staff("carol")  # staff without a role: her own conversations' pauses only
    assert listed(logged_in(carol).get(INBOX)) == set()
    assert logged_in(carol).get(page(pause)).status_code == 404
    assert decide(logged_in(carol), pause, "APPROVED").status_code == 404
    agent.is_staff = True  # a service account never uses the admin, even marked staff
    agent.save(update_fields=["is_staff"])
    refused = logged_in(agent).get(page(pause))
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")
    assert still_pending(pause, filed)
    assert logged_in(admin_user).get(page(pause)).status_code == 200


def test_the_history_lists_a_decided_request_and_all_its_pauses(agent, approver):
    filed, pause = filed_pause(agent)
    client = logged_in(approver)
    decide(client, pause, "APPROVED")
    body = text_of(client.get(HISTORY))
    assert f'request <span title="{filed["id"]}">' in body and ">refund-bot</span>" in body
    one = client.get(HISTORY, {"subject": filed["id"], "decided_by": "all"})
    assert one.status_code == 200 and f"All pauses of approval request {filed['id']}" in text_of(one)
