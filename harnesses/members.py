"""Deterministic member agents and small helpers shared by the discussion tests."""

from __future__ import annotations

from typing import Any

from approvals.models import Pause, SubjectType
from groups.demo_group import demo_member_document
from groups.store import create_group
from harnesses.factories import deployed_agent


def answering(name: str, answer: str) -> str:
    """A deployed member that answers every input with ``answer``."""
    return deployed_agent(demo_member_document(name, answer))


def echoing(name: str) -> str:
    """A deployed member that answers with its input: what it was told is what it says."""
    document = demo_member_document(name, "{memory.current.input}")
    document["workflows"][0]["tasks"].append({"id": "templating", "type": "templating"})
    return deployed_agent(document)


def asked(name: str, action: str) -> str:
    """A deployed member that answers and adds ``action`` whenever it is asked a question (not on its
    conversation's start)."""
    document = demo_member_document(name, f"{name} answers.")
    tasks = document["workflows"][0]["tasks"]
    tasks.insert(
        0,
        {"id": "parse", "type": "parser", "dictionaries": [{"word": "question", "expressions": "asked(q)"}]},
    )
    tasks[1]["rules"] = [
        {
            "name": "Asked",
            "actions": [action, "answer"],
            "conditions": [{"type": "inputmatcher", "configs": {"expressions": "asked(*)"}}],
        }
    ]
    return deployed_agent(document)


def pausing(name: str) -> str:
    """A member that asks for a human approval (PAUSE_CONVERSATION) whenever it is asked a question."""
    return asked(name, "PAUSE_CONVERSATION")


def group(members: list[tuple[str, str]], phases: list[dict[str, Any]], **top: Any) -> str:
    document = {
        "name": "panel",
        "members": [{"agentId": agent_id, "role": role} for agent_id, role in members],
        "phases": phases,
    } | top
    return str(create_group(document=document).group_id)


def discuss(client, group_id: str, question: str = "Should we ship on Friday?", status: int = 201) -> Any:
    response = client.post(f"/groups/{group_id}/conversations", {"question": question}, format="json")
    assert response.status_code == status, response.content
    return response.json()


def said(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(e["phase"], e["role"], e["status"], e["content"]) for e in body["transcript"]]


PHASES = [
    {"name": "Opinions", "type": "OPINION"},
    {"name": "Challenge", "type": "CHALLENGE", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]


def approve(
    client, body: dict[str, Any], decision: dict[str, Any] | None = None, status: int = 200, wait: int = 60
) -> Any:
    """The discussion's pause approved (or ``decision``) with ``?wait``; the answer, checked for ``status``."""
    response = client.post(
        f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait={wait}",
        decision if decision is not None else {"decision": {"verdict": "APPROVED"}},
        format="json",
    )
    assert response.status_code == status, response.content
    return response.json()


def pause_of(body: dict[str, Any]) -> Pause:
    return Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"])
