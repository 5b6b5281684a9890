"""The group discussion the group benches run on, created through the REST API of a live stack.

Its members are the demo group's deterministic agents (``groups.demo_group``: a rule without conditions
answers every input with one fixed line, no network, no model); its phases are the three of a
discussion with one approval gate: OPINION, CHALLENGE (``requiresApproval``, a PHASE pause), SYNTHESIS.
A discussion on it runs 6 member turns to the gate, and 3 more after the approval.
"""

from __future__ import annotations

from typing import Any

PHASES = [
    {"name": "Opinions", "type": "OPINION"},
    {"name": "Challenge", "type": "CHALLENGE", "requiresApproval": True},
    {"name": "Synthesis", "type": "SYNTHESIS"},
]
GATE_INDEX = 1  # the CHALLENGE phase
TURNS_TO_GATE, TURNS_IN_ALL = 6, 9


def deploy_agent(admin: Any, document: dict[str, Any]) -> str:
    """Create the agent as admin and deploy its version 1 to production; its id."""
    response = admin.post("/agentstore/agents", json=document)
    response.raise_for_status()
    agent_id, version = response.json()["id"], response.json()["version"]
    admin.post(
        f"/administration/production/deploy/{agent_id}", params={"version": version}
    ).raise_for_status()
    return agent_id


def deploy_members(admin: Any) -> list[tuple[str, str, str]]:
    """The demo group's three member agents, deployed: (agentId, role, displayName) each."""
    # local import: needs Django, which the Stack sets up
    from groups.demo_group import DEMO_MEMBERS, demo_member_document

    return [
        (deploy_agent(admin, demo_member_document(f"bench-{name}", answer)), role, name)
        for name, role, answer in DEMO_MEMBERS
    ]


def group_document(name: str, members: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "bench: three deterministic members, one PHASE gate after the challenge",
        "members": [
            {"agentId": agent_id, "role": role, "displayName": display} for agent_id, role, display in members
        ],
        "phases": PHASES,
        "protocol": {"maxTurns": 20},
        "hitlConfig": {"granularity": "PHASE", "approvalTimeout": "PT30M", "timeoutPolicy": "AUTO_REJECT"},
    }


def create_group(admin: Any, name: str, members: list[tuple[str, str, str]]) -> str:
    """Save the group (version 1) as admin; its id."""
    response = admin.post("/groupstore/groups", json=group_document(name, members))
    if response.status_code != 201:
        raise RuntimeError(f"create group: {response.status_code} {response.text[:300]}")
    return response.json()["id"]
