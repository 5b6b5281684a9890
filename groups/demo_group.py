"""The demo group "demo-discussion" and its member agents: the one copy of each document.

``manage.py hitl_demo`` creates and deploys the members, then saves the group naming them; the tests and
docs/groups.md point here. Its SYNTHESIS phase waits for a human approval.
"""

from __future__ import annotations

import copy
from typing import Any

DEMO_GROUP_NAME = "demo-discussion"

# Each member agent answers every input with its one line: (name, role, what it says).
DEMO_MEMBERS: tuple[tuple[str, str, str], ...] = (
    ("optimist-bot", "Optimist", "This can work: start small and measure."),
    ("critic-bot", "Critic", "What is the cost if it fails, and who notices first?"),
    ("moderator-bot", "Moderator", "Summary: try it on one team for two weeks, then decide."),
)


def demo_member_document(name: str, answer: str) -> dict[str, Any]:
    """A member agent that answers every input with ``answer`` (a rule without conditions always fires)."""
    return {
        "name": name,
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "rules",
                        "type": "behavior_rules",
                        "rules": [{"name": "Answer", "actions": ["answer"], "conditions": []}],
                    },
                    {"id": "output", "type": "output", "outputs": [{"action": "answer", "texts": [answer]}]},
                ],
            }
        ],
    }


_DEMO_GROUP_DOCUMENT: dict[str, Any] = {
    "name": DEMO_GROUP_NAME,
    "description": "Three agents discuss a proposal; a human approves the synthesis.",
    "members": [],  # filled in with the member agents' ids
    "phases": [
        {"name": "Opinions", "type": "OPINION"},
        {"name": "Challenge", "type": "CHALLENGE", "repeats": 2},
        {"name": "Synthesis", "type": "SYNTHESIS", "requiresApproval": True},
    ],
    "protocol": {"maxTurns": 20},
    "hitlConfig": {"granularity": "PHASE", "approvalTimeout": "PT30M", "timeoutPolicy": "AUTO_REJECT"},
}


def demo_group_document(member_ids: dict[str, str]) -> dict[str, Any]:
    """The demo group's document with its members: ``member_ids`` maps each member agent's name to its id."""
    document = copy.deepcopy(_DEMO_GROUP_DOCUMENT)
    document["members"] = [
        {"agentId": member_ids[name], "role": role, "displayName": name} for name, role, _ in DEMO_MEMBERS
    ]
    return document
