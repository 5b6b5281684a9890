"""What a member is told on its turn: the question, the phase, its role and what members said before."""

from __future__ import annotations

from groups.prompts import ASKS, PLAN_ASK, member_prompt, planner_prompt, task_prompt

PAT, CARLA = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
NAMES = {PAT: "Pat", CARLA: "Carla"}
SAID = [
    {"phase": "Opinions", "member": PAT, "status": "OK", "content": "Ship it."},
    {"phase": "Opinions", "member": CARLA, "status": "SKIPPED", "content": "", "note": "paused"},
    {"phase": "Opinions", "member": None, "status": "ERROR", "content": "", "note": "boom"},
]


def test_a_member_prompt_has_the_question_phase_round_role_and_only_what_was_said():
    phase = {"name": "Challenge", "type": "CHALLENGE", "repeats": 2, "description": "Be blunt."}

    prompt = member_prompt(
        question="Ship on Friday?", phase=phase, role="Critic", transcript=SAID, names=NAMES, round_number=2
    )

    assert prompt.splitlines() == [
        "Question: Ship on Friday?",
        "Phase: Challenge (CHALLENGE, round 2 of 2)",
        "Phase description: Be blunt.",
        "Your role: Critic",
        "Transcript so far:",
        "- [Opinions] Pat: Ship it.",
        ASKS["CHALLENGE"],
    ]


def test_the_first_member_prompt_says_nothing_was_said_yet():
    prompt = member_prompt(
        question="Q?", phase={"name": "Opinions", "type": "OPINION"}, role=None, transcript=[], names=NAMES
    )

    assert prompt.splitlines() == [
        "Question: Q?",
        "Phase: Opinions (OPINION)",
        "Transcript so far: (nothing yet)",
        ASKS["OPINION"],
    ]


def test_a_planner_prompt_lists_the_members_and_the_declared_tasks():
    task = {"id": "notes", "description": "Write notes", "assignee": CARLA}
    phase = {"name": "Ship", "type": "EXECUTE", "planner": PAT, "tasks": [task]}

    lines = planner_prompt(
        question="Q?", phase=phase, role="Planner", transcript=SAID, names=NAMES
    ).splitlines()

    assert f"Members: {PAT} (Pat), {CARLA} (Carla)" in lines
    assert any(line.startswith("Declared tasks (a starting point): ") and '"notes"' in line for line in lines)
    assert lines[-1] == PLAN_ASK


def test_a_task_prompt_carries_the_results_of_its_dependencies():
    phase = {"name": "Ship", "type": "EXECUTE"}
    task = {"id": "tag", "description": "Tag the release"}

    prompt = task_prompt(
        question="Q?",
        phase=phase,
        role="Engineer",
        task=task,
        dependencies=[{"id": "notes", "result": "Notes written."}],
    )

    assert prompt.splitlines()[-4:] == [
        "Your task (tag): Tag the release",
        "Results of the tasks it depends on:",
        "- notes: Notes written.",
        "Do the task and answer with its result.",
    ]
