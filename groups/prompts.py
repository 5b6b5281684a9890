"""What a member is told on its turn: pure functions of the question, the phase and what was said so far.

A member talks through an ordinary 1:1 conversation, so its whole input is one text: the question, the
phase it is in (name and type, and which round), its role, the transcript so far (only what members
said: a skipped or failed turn has nothing to show), and what the phase asks of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

OK = "OK"

ASKS = {
    "OPINION": "Give your opinion on the question.",
    "CHALLENGE": "Challenge the opinions so far: name the weakest point and what would change your mind.",
    "SYNTHESIS": "Synthesize the discussion into one conclusion the group can act on.",
}
PLAN_ASK = (
    "Plan the work as a JSON array of tasks, each "
    '{"id": "...", "description": "...", "assignee": "<a member\'s agentId>", "dependsOn": ["<task id>"]}, '
    "and answer with the JSON only."
)


def _said_so_far(transcript: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> list[str]:
    if not any(entry.get("status") == OK for entry in transcript):
        return ["Transcript so far: (nothing yet)"]
    lines = ["Transcript so far:"]
    for entry in transcript:
        if entry.get("status") == OK:
            speaker = names.get(entry.get("member") or "", entry.get("member") or "?")
            lines.append(f"- [{entry['phase']}] {speaker}: {entry['content']}")
    return lines


def _header(question: str, phase: Mapping[str, Any], role: str | None, round_number: int | None) -> list[str]:
    rounds = int(phase.get("repeats") or 1)
    round_text = f", round {round_number} of {rounds}" if round_number is not None and rounds > 1 else ""
    lines = [f"Question: {question}", f"Phase: {phase['name']} ({phase['type']}{round_text})"]
    if phase.get("description"):
        lines.append(f"Phase description: {phase['description']}")
    if role:
        lines.append(f"Your role: {role}")
    return lines


def member_prompt(
    *,
    question: str,
    phase: Mapping[str, Any],
    role: str | None,
    transcript: Sequence[Mapping[str, Any]],
    names: Mapping[str, str],
    round_number: int = 1,
) -> str:
    """The input of a member's turn in an OPINION, CHALLENGE or SYNTHESIS phase."""
    lines = _header(question, phase, role, round_number)
    lines += _said_so_far(transcript, names)
    lines.append(ASKS.get(str(phase["type"]), ASKS["OPINION"]))
    return "\n".join(lines)


def planner_prompt(
    *,
    question: str,
    phase: Mapping[str, Any],
    role: str | None,
    transcript: Sequence[Mapping[str, Any]],
    names: Mapping[str, str],
) -> str:
    """The planner's input: the discussion so far, the members it may assign, and any declared tasks."""
    lines = _header(question, phase, role, None)
    lines += _said_so_far(transcript, names)
    lines.append("Members: " + ", ".join(f"{agent_id} ({name})" for agent_id, name in names.items()))
    if phase.get("tasks"):
        lines.append("Declared tasks (a starting point): " + json.dumps(phase["tasks"]))
    lines.append(PLAN_ASK)
    return "\n".join(lines)


def task_prompt(
    *,
    question: str,
    phase: Mapping[str, Any],
    role: str | None,
    task: Mapping[str, Any],
    dependencies: Sequence[Mapping[str, Any]],
) -> str:
    """An assignee's input: the task and the results of the tasks it depends on."""
    lines = _header(question, phase, role, None)
    lines.append(f"Your task ({task['id']}): {task['description']}")
    if dependencies:
        lines.append("Results of the tasks it depends on:")
        lines += [f"- {done['id']}: {done['result']}" for done in dependencies]
    if task.get("feedback"):
        lines.append(f"A reviewer rejected your previous result: {task['feedback']}")
        lines.append(
            "Do the task again, taking the reviewer's feedback into account, and answer with its result."
        )
    else:
        lines.append("Do the task and answer with its result.")
    return "\n".join(lines)
