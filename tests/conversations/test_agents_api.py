"""The agent store, deployment and ZIP backup through the REST API."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from conversations.models import Agent
from harnesses.factories import account_bot, paused_conversation, start

pytestmark = pytest.mark.django_db


def _zip(files: dict[str, object]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content if isinstance(content, str) else json.dumps(content))
    return buffer.getvalue()


def test_create_read_update_and_list_versions(admin_client, alice_client):
    created = admin_client.post("/agentstore/agents", account_bot(), format="json")
    assert created.status_code == 201, created.content
    agent_id = created.json()["id"]
    assert created.json()["version"] == 1 and created.json()["warnings"] == []
    changed = account_bot(name="account-bot-2")
    assert admin_client.put(f"/agentstore/agents/{agent_id}", changed, format="json").json()["version"] == 2
    assert (
        alice_client.get(f"/agentstore/agents/{agent_id}?version=1").json()["document"]["name"]
        == "account-bot"
    )
    assert alice_client.get(f"/agentstore/agents/{agent_id}").json()["version"] == 2
    assert alice_client.get("/agentstore/agents").json() == [
        {"id": agent_id, "name": "account-bot-2", "version": 2}
    ]


def test_only_admins_change_or_deploy_agents(alice_client, approver_client, admin_client):
    assert alice_client.post("/agentstore/agents", account_bot(), format="json").status_code == 403
    assert approver_client.post("/agentstore/agents", account_bot(), format="json").status_code == 403
    agent_id = admin_client.post("/agentstore/agents", account_bot(), format="json").json()["id"]
    assert alice_client.post(f"/administration/production/deploy/{agent_id}").status_code == 403
    assert alice_client.delete(f"/agentstore/agents/{agent_id}").status_code == 403


def test_invalid_document_reports_every_error_with_its_field_path(admin_client):
    document = account_bot()
    document["hitlConfig"] = {
        "timeoutPolicy": "AUTO_REJECT",
        "approvalTimeout": "30m",
        "pauseReason": "x" * 501,
    }
    document["workflows"][0]["tasks"][1]["rules"][0]["conditions"][0]["configs"]["expressions"] = "broken(("
    response = admin_client.post("/agentstore/agents", document, format="json")
    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert "hitlConfig.approvalTimeout" in fields
    assert "hitlConfig.pauseReason" in fields
    assert "workflows[0].tasks[1].rules[0].conditions[0].configs.expressions" in fields
    assert not Agent.objects.exists()


@pytest.mark.parametrize("timeout", ["PT30S", "PT15M", "P1D"])
def test_valid_durations_are_accepted(admin_client, timeout):
    document = account_bot(hitlConfig={"timeoutPolicy": "ABORT", "approvalTimeout": timeout})
    assert admin_client.post("/agentstore/agents", document, format="json").status_code == 201


@pytest.mark.parametrize("timeout", ["30m", "P1W", "PT0S", "-PT5M", None])
def test_finite_policy_needs_a_valid_positive_duration(admin_client, timeout):
    config = {"timeoutPolicy": "AUTO_APPROVE"} | ({"approvalTimeout": timeout} if timeout else {})
    response = admin_client.post("/agentstore/agents", account_bot(hitlConfig=config), format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "hitlConfig.approvalTimeout"


def test_near_miss_of_a_reserved_action_is_a_warning_in_the_save_response(admin_client):
    document = account_bot()
    document["workflows"][0]["tasks"][1]["rules"][0]["actions"] = ["Pause_Conversation", "confirm_deletion"]
    response = admin_client.post("/agentstore/agents", document, format="json")
    assert response.status_code == 201
    warnings = response.json()["warnings"]
    assert any("PAUSE_CONVERSATION" in w["message"] for w in warnings)
    assert any(w["field"] == "hitlConfig" for w in warnings)  # nothing can trigger its hitlConfig now


def test_reserved_action_as_quick_reply_expression_is_rejected(admin_client):
    document = account_bot()
    document["workflows"][0]["tasks"][2]["outputs"][1]["quickReplies"] = [
        {"value": "Pause please", "expressions": "PAUSE_CONVERSATION"}
    ]
    response = admin_client.post("/agentstore/agents", document, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"].startswith(
        "workflows[0].tasks[2].outputs[1].quickReplies[0]"
    )


def test_deploy_undeploy_and_status_per_environment(admin_client, alice_client):
    agent_id = admin_client.post("/agentstore/agents", account_bot(), format="json").json()["id"]
    assert admin_client.post(f"/administration/test/deploy/{agent_id}?version=1").json()[
        "deployedVersions"
    ] == [1]
    status = alice_client.get(f"/administration/production/deploymentstatus/{agent_id}").json()
    assert status["deployedVersions"] == []
    start_response = alice_client.post(f"/agents/{agent_id}/start?environment=production")
    assert start_response.status_code == 409 and start_response.json()["code"] == "NOT_DEPLOYED"
    assert start(alice_client, agent_id, environment="test")
    assert admin_client.post(f"/administration/test/undeploy/{agent_id}").json()["deployedVersions"] == []
    assert admin_client.post(f"/administration/staging/deploy/{agent_id}").status_code == 400
    assert admin_client.post(f"/administration/test/deploy/{agent_id}?version=9").status_code == 404


def test_a_paused_conversation_does_not_keep_its_version_deployed(admin_client, alice_client):
    agent_id = admin_client.post("/agentstore/agents", account_bot(), format="json").json()["id"]
    admin_client.post(f"/administration/production/deploy/{agent_id}")
    paused_conversation(alice_client, agent_id)
    assert admin_client.post(f"/administration/production/undeploy/{agent_id}").status_code == 200


def test_zip_export_then_import_round_trips(admin_client):
    agent_id = admin_client.post("/agentstore/agents", account_bot(), format="json").json()["id"]
    exported = admin_client.get(f"/backup/export/{agent_id}")
    assert exported.status_code == 200 and exported["Content-Type"] == "application/zip"
    imported = admin_client.post("/backup/import", exported.content, content_type="application/zip")
    assert imported.status_code == 201, imported.content
    (row,) = imported.json()
    assert row["id"] != agent_id and row["version"] == 1
    assert admin_client.get(f"/agentstore/agents/{row['id']}").json()["document"] == account_bot()


def test_a_bad_document_in_a_zip_names_file_and_field_and_imports_nothing(admin_client):
    bad = account_bot(hitlConfig={"timeoutPolicy": "AUTO_REJECT"})
    archive = _zip({"good.json": account_bot(), "bad.json": bad})
    response = admin_client.post("/backup/import", archive, content_type="application/zip")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert (error["file"], error["field"]) == ("bad.json", "hitlConfig.approvalTimeout")
    assert "bad.json" in response.json()["detail"]
    assert not Agent.objects.exists()


@pytest.mark.parametrize("payload", [b"not a zip", _zip({"x.json": "{broken"}), _zip({"readme.txt": "hi"})])
def test_unreadable_archives_are_400(admin_client, payload):
    response = admin_client.post("/backup/import", payload, content_type="application/zip")
    assert response.status_code == 400
    assert not Agent.objects.exists()


def test_deleted_agent_cannot_start_but_its_paused_conversation_keeps_its_document(
    admin_client, alice_client
):
    agent_id = admin_client.post("/agentstore/agents", account_bot(), format="json").json()["id"]
    admin_client.post(f"/administration/production/deploy/{agent_id}")
    conversation_id = paused_conversation(alice_client, agent_id)
    assert admin_client.delete(f"/agentstore/agents/{agent_id}").status_code == 204
    assert alice_client.post(f"/agents/{agent_id}/start").status_code == 404
    assert alice_client.get(f"/agents/{conversation_id}").json()["state"] == "AWAITING_HUMAN"


def test_a_literal_credential_in_a_document_is_redacted_for_non_admins(admin_client, alice_client):
    document = account_bot()
    document["workflows"][0]["tasks"].append(
        {
            "id": "assistant",
            "type": "llm",
            "provider": {"type": "openai", "model": "m", "apiKey": "sk-" + "a" * 30},
        }
    )
    response = admin_client.post("/agentstore/agents", document, format="json")
    assert response.status_code == 201
    assert any(w["field"].endswith("provider.apiKey") for w in response.json()["warnings"])
    agent_id = response.json()["id"]
    as_alice = alice_client.get(f"/agentstore/agents/{agent_id}").content.decode()
    assert "a" * 30 not in as_alice
    as_admin = admin_client.get(f"/agentstore/agents/{agent_id}").json()
    assert as_admin["document"]["workflows"][0]["tasks"][-1]["provider"]["apiKey"] == "sk-" + "a" * 30
    assert alice_client.get(f"/backup/export/{agent_id}").status_code == 403
