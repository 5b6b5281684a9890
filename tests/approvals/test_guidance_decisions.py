"""A reply with guidance through the REST resume body (``"guidance": true``), the one the admin's
"Reply with guidance" sends: a rejection whose note is the reviewer's instruction, never empty."""

from __future__ import annotations

import pytest

from approvals.decision_input import GUIDANCE_REQUIRED
from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.factories import deployed_agent, paused_conversation

pytestmark = pytest.mark.django_db

GUIDANCE = "Ask which account first."


def resume(client, conversation_id: str, body: dict):
    return client.post(f"/agents/{conversation_id}/resume?wait=5", body, format="json")


def pending(conversation_id: str) -> Pause:
    return Pause.objects.get(subject_id=conversation_id)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"verdict": "REJECTED", "guidance": True}, "note", GUIDANCE_REQUIRED),
        ({"verdict": "REJECTED", "note": "  ", "guidance": True}, "note", GUIDANCE_REQUIRED),
        ({"verdict": "APPROVED", "note": GUIDANCE, "guidance": True}, "guidance", "only a rejection"),
        (
            {
                "verdict": "REJECTED",
                "note": GUIDANCE,
                "guidance": True,
                "toolDecisions": {"c": {"verdict": "REJECTED"}},
            },
            "toolDecisions",
            "no per-call decisions",
        ),
        ({"verdict": "REJECTED", "note": GUIDANCE, "guidance": "yes"}, "guidance", "must be true or false"),
    ],
)
def test_a_bad_reply_with_guidance_is_a_400_and_consumes_nothing(
    alice_client, approver_client, body, field, message
):
    conversation_id = paused_conversation(alice_client, deployed_agent())
    response = resume(approver_client, conversation_id, body)
    assert response.status_code == 400, response.content
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert message in errors[field]
    assert pending(conversation_id).status == PauseStatus.PENDING
    assert not AuditEntry.objects.filter(verb="hitl.approval", subject_id=conversation_id).exists()


def test_a_rest_reply_with_guidance_tells_the_conversation_and_is_audited(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client, deployed_agent())
    response = resume(
        approver_client, conversation_id, {"verdict": "REJECTED", "note": GUIDANCE, "guidance": True}
    )
    assert response.status_code == 200, response.content
    assert response.json()["output"] == [
        f"This action was rejected by a human reviewer. The reviewer declined and gave guidance: {GUIDANCE}"
    ]
    assert pending(conversation_id).decision_details == {"guidance": True}
    entry = AuditEntry.objects.get(verb="hitl.approval", subject_id=conversation_id)
    assert entry.detail["reviewerAction"] == "reply_with_guidance"


def test_without_guidance_a_rejection_reads_as_before(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client, deployed_agent())
    response = resume(
        approver_client, conversation_id, {"verdict": "REJECTED", "note": "no", "guidance": False}
    )
    assert response.json()["output"] == ["This action was rejected by a human reviewer. Reason: no"]
    assert pending(conversation_id).decision_details == {}
    assert (
        "reviewerAction"
        not in AuditEntry.objects.get(verb="hitl.approval", subject_id=conversation_id).detail
    )


def test_the_schema_documents_the_guidance_field(anon_client):
    schema = anon_client.get("/api/schema/?format=json").json()
    field = schema["components"]["schemas"]["Decision"]["properties"]["guidance"]
    assert field["type"] == "boolean" and "guidance" in field["description"]
