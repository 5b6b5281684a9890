"""What an MCP inbox row says is asked, so that an AI client can tell its user without one call per row:
the agent's or the group's name, and the requester's latest input (a conversation's last live message, a
discussion's question) on one line. Read for the whole page at once: a query per kind, never per row."""

from __future__ import annotations

from typing import Any

from approvals.engines import handler_for
from conversations.models import Agent
from groups.models import Group, GroupConversation

INPUT_MAX = 280  # characters of the latest input on a row


def one_line(text: str | None, limit: int = INPUT_MAX) -> str | None:
    """``text`` on one line, clamped to ``limit`` characters (None when there is none)."""
    flat = " ".join((text or "").split())
    if not flat:
        return None
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _names(model: type[Agent] | type[Group], ids: set[str]) -> dict[str, str]:
    if not ids:
        return {}
    return {str(key): name for key, name in model.objects.filter(pk__in=ids).values_list("id", "name")}


def _latest_inputs(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The latest input of each row's subject: its engine's (1:1 conversations), or the question of a
    discussion."""
    found: dict[str, str] = {}
    by_surface: dict[str, list[str]] = {}
    for row in rows:
        by_surface.setdefault(row["surface"], []).append(row["conversationId"])
    for surface, subject_ids in by_surface.items():
        try:
            read = getattr(handler_for(surface), "latest_inputs", None)
        except LookupError:
            read = None
        if read is not None:
            found.update({str(key): text for key, text in read(subject_ids).items()})
    discussions = [
        row["conversationId"] for row in rows if row["groupId"] and row["conversationId"] not in found
    ]
    if discussions:
        questions = GroupConversation.objects.filter(pk__in=discussions).values_list("id", "question")
        found.update({str(key): question for key, question in questions})
    return found


def what_is_asked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (inbox rows of the API contract) each with ``agentName``, ``groupName`` and
    ``latestInput``."""
    agents = _names(Agent, {row["agentId"] for row in rows if row["agentId"]})
    groups = _names(Group, {row["groupId"] for row in rows if row["groupId"]})
    inputs = _latest_inputs(rows)
    return [
        {
            **row,
            "agentName": agents.get(row["agentId"] or ""),
            "groupName": groups.get(row["groupId"] or ""),
            "latestInput": one_line(inputs.get(row["conversationId"])),
        }
        for row in rows
    ]
