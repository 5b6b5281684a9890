"""The Slack integration store: admins only; secrets only as ${vault:…} references, never values."""

from __future__ import annotations

import pytest

from harnesses.factories import deployed_agent
from harnesses.members import PHASES, answering, group

pytestmark = pytest.mark.django_db


def body(agent_id: str, **changes) -> dict:
    return {
        "name": "acme",
        "agentId": agent_id,
        "signingSecret": "${vault:slack.signing}",
        "botToken": "${vault:slack.bot}",
        "hitlApprovalChannel": "C1",
        "hitlApproverUserIds": "U1,U2",
        **changes,
    }


def test_an_admin_creates_reads_updates_and_deletes_an_integration(admin_client):
    agent_id = deployed_agent()
    created = admin_client.post("/integrationstore/slack", body(agent_id), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["conversationOwner"] == "admin"
    assert created.json()["botToken"] == "${vault:slack.bot}"

    update = body(agent_id, hitlApprovalChannel="C2")
    del update["name"]
    assert (
        admin_client.put("/integrationstore/slack/acme", update, format="json").json()["hitlApprovalChannel"]
        == "C2"
    )
    assert [row["name"] for row in admin_client.get("/integrationstore/slack").json()] == ["acme"]
    assert admin_client.delete("/integrationstore/slack/acme").status_code == 204
    assert admin_client.get("/integrationstore/slack/acme").status_code == 404


@pytest.mark.parametrize("field", ["signingSecret", "botToken"])
def test_a_raw_secret_is_refused_and_stored_nowhere(admin_client, field):
    response = admin_client.post(
        "/integrationstore/slack", body(deployed_agent(), **{field: "xoxb-raw-value"}), format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert "xoxb-raw-value" not in response.content.decode()


def test_only_admins_use_the_store(approver_client, bob_client):
    assert approver_client.get("/integrationstore/slack").status_code == 403
    assert (
        bob_client.post("/integrationstore/slack", body(deployed_agent()), format="json").status_code == 403
    )


def test_a_group_integration_names_its_group_and_no_agent(admin_client):
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    payload = body(None, groupId=group_id)
    del payload["agentId"]

    created = admin_client.post("/integrationstore/slack", payload, format="json")

    assert created.status_code == 201, created.content
    assert (created.json()["groupId"], created.json()["agentId"]) == (group_id, None)


@pytest.mark.parametrize(
    ("target", "field"),
    [("both", "groupId"), ("neither", "agentId"), ("unknown group", "groupId")],
)
def test_an_integration_targets_exactly_one_agent_or_group(admin_client, target, field):
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    changes = {
        "both": {"groupId": group_id},
        "neither": {"agentId": None},
        "unknown group": {"agentId": None, "groupId": "00000000-0000-0000-0000-000000000001"},
    }[target]

    response = admin_client.post("/integrationstore/slack", body(deployed_agent(), **changes), format="json")

    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field
