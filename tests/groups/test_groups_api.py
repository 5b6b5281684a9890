"""The group store through the REST API: admins write, every authenticated caller reads."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from django.core.management import call_command

from conversations.agents import create_agent, deployed_version
from groups.demo_group import DEMO_GROUP_NAME, DEMO_MEMBERS, demo_group_document
from groups.models import Group, GroupVersion
from harnesses.factories import account_bot

pytestmark = pytest.mark.django_db


@pytest.fixture
def members() -> list[str]:
    return [str(create_agent(document=account_bot(name=f"member-{n}")).agent_id) for n in range(2)]


def panel(members: list[str], **top: Any) -> dict[str, Any]:
    return {
        "name": "panel",
        "members": [{"agentId": m} for m in members],
        "phases": [{"name": "Opinions", "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    } | top


def test_create_read_update_and_list_versions(admin_client, alice_client, members):
    created = admin_client.post("/groupstore/groups", panel(members), format="json")
    assert created.status_code == 201, created.content
    group_id = created.json()["id"]
    assert created.json() == {"id": group_id, "version": 1}

    updated = admin_client.put(
        f"/groupstore/groups/{group_id}", panel(members, name="panel-2"), format="json"
    )
    assert updated.json() == {"id": group_id, "version": 2}
    first = alice_client.get(f"/groupstore/groups/{group_id}?version=1").json()
    assert first == {"id": group_id, "version": 1, "document": panel(members)}
    assert alice_client.get(f"/groupstore/groups/{group_id}").json()["document"]["name"] == "panel-2"
    assert alice_client.get("/groupstore/groups").json() == [
        {"id": group_id, "name": "panel-2", "version": 2}
    ]


def test_an_update_leaves_earlier_versions_as_they_were(admin_client, members):
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    admin_client.put(
        f"/groupstore/groups/{group_id}",
        panel(members, phases=[{"name": "x", "type": "OPINION"}]),
        format="json",
    )

    versions = GroupVersion.objects.filter(group_id=group_id).order_by("version")
    assert [v.document for v in versions] == [
        panel(members),
        panel(members, phases=[{"name": "x", "type": "OPINION"}]),
    ]


def test_only_admins_write_groups(alice_client, approver_client, admin_client, members):
    assert alice_client.post("/groupstore/groups", panel(members), format="json").status_code == 403
    assert approver_client.post("/groupstore/groups", panel(members), format="json").status_code == 403
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    assert (
        alice_client.put(f"/groupstore/groups/{group_id}", panel(members), format="json").status_code == 403
    )
    assert approver_client.delete(f"/groupstore/groups/{group_id}").status_code == 403
    assert approver_client.get(f"/groupstore/groups/{group_id}").status_code == 200
    assert GroupVersion.objects.filter(group_id=group_id).count() == 1


def test_anonymous_callers_are_401(anon_client, admin_client, members):
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    assert anon_client.get("/groupstore/groups").status_code == 401
    assert anon_client.get(f"/groupstore/groups/{group_id}").status_code == 401
    assert anon_client.post("/groupstore/groups", panel(members), format="json").status_code == 401


@pytest.mark.parametrize("group_id", ["0b5e4c1e-1d1a-4f8e-9c1a-6a2c2f1e9b01", "not-a-uuid"])
def test_an_unknown_group_is_404(admin_client, members, group_id):
    assert admin_client.get(f"/groupstore/groups/{group_id}").status_code == 404
    assert (
        admin_client.put(f"/groupstore/groups/{group_id}", panel(members), format="json").status_code == 404
    )
    assert admin_client.delete(f"/groupstore/groups/{group_id}").status_code == 404


def test_an_unknown_version_is_404_and_a_bad_one_400(admin_client, members):
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    assert admin_client.get(f"/groupstore/groups/{group_id}?version=7").status_code == 404
    assert admin_client.get(f"/groupstore/groups/{group_id}?version=0").status_code == 400


def test_a_deleted_group_leaves_the_list_and_answers_404(admin_client, alice_client, members):
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    assert admin_client.delete(f"/groupstore/groups/{group_id}").status_code == 204

    assert alice_client.get("/groupstore/groups").json() == []
    assert alice_client.get(f"/groupstore/groups/{group_id}").status_code == 404
    assert admin_client.delete(f"/groupstore/groups/{group_id}").status_code == 404
    assert GroupVersion.objects.filter(group_id=group_id).count() == 1  # kept


def test_a_bad_document_is_400_naming_each_field_and_saves_nothing(admin_client, members):
    document = panel(members, protocol={"maxTurns": 0})
    document["phases"][1]["type"] = "VOTE"
    document["members"].append({"agentId": str(uuid.uuid4())})
    response = admin_client.post("/groupstore/groups", document, format="json")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert {e["field"] for e in response.json()["errors"]} == {
        "protocol.maxTurns",
        "phases[1].type",
        "members[2].agentId",
    }
    assert not Group.objects.exists()


def test_a_bad_update_keeps_the_latest_version(admin_client, members):
    group_id = admin_client.post("/groupstore/groups", panel(members), format="json").json()["id"]
    response = admin_client.put(f"/groupstore/groups/{group_id}", panel(members, phases=[]), format="json")

    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "phases"
    assert admin_client.get(f"/groupstore/groups/{group_id}").json()["version"] == 1


def test_a_body_that_is_not_an_object_is_400(admin_client):
    response = admin_client.post("/groupstore/groups", [], format="json")
    assert response.status_code == 400


# --- the demo group -------------------------------------------------------------------------------------


def _run_demo() -> list[str]:
    out = io.StringIO()
    call_command("hitl_demo", stdout=out)
    return out.getvalue().strip().splitlines()


def test_hitl_demo_creates_the_demo_group_with_deployed_members(db, alice_client):
    lines = _run_demo()
    group_id = lines[lines.index(next(line for line in lines if "demo group" in line)) + 1]

    group = Group.objects.get(pk=uuid.UUID(group_id))
    document = group.versions.get(version=1).document
    assert group.name == DEMO_GROUP_NAME
    members = {m["displayName"]: m["agentId"] for m in document["members"]}
    assert document == demo_group_document(members)  # the one copy, as stored
    assert [name for name, _, _ in DEMO_MEMBERS] == list(members)
    assert all(
        deployed_version(agent_id=uuid.UUID(a), version=1, environment="production") is not None
        for a in members.values()
    )
    phases = document["phases"]
    assert [p["type"] for p in phases] == ["OPINION", "CHALLENGE", "SYNTHESIS"]
    assert [p.get("requiresApproval", False) for p in phases].count(True) == 1
    assert alice_client.get(f"/groupstore/groups/{group_id}").status_code == 200


def test_hitl_demo_run_twice_reuses_the_demo_group(db):
    first, second = _run_demo(), _run_demo()

    assert first[1] == second[1] and first[-1] == second[-1]
    assert Group.objects.filter(name=DEMO_GROUP_NAME).count() == 1
