"""R5, state-machine conformance (docs/reliability.md): every step of pause, decide, cancel, time out and
restore, on 1:1 conversations and group discussions, leaves the database as the model says.

Fast size here (50 examples x 30 steps, derandomized so CI is deterministic); full size
``bench/state_machine.py`` (200 x 50 through ``HITL_STATE_MACHINE_SIZE``, random seeds)."""

from __future__ import annotations

import os
import time

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from harnesses import pause_state_machine as machine

pytestmark = pytest.mark.django_db


def run_machine(http_recorder, *, examples: int, steps: int, derandomize: bool) -> None:
    machine.HITS.clear()
    machine.PauseStateMachine.fixtures = machine.make_fixtures(http_recorder.url)
    started = time.monotonic()
    with connection.execute_wrapper(machine.count_queries):
        run_state_machine_as_test(
            machine.PauseStateMachine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                derandomize=derandomize,
                database=None,
                suppress_health_check=list(HealthCheck),
                print_blob=True,
            ),
        )
    elapsed = time.monotonic() - started
    rules = sum(n for name, n in machine.HITS.items() if "->" not in name)
    queries = sum(machine.QUERIES.values())
    print(
        f"\nR5 state machine: {examples} examples x {steps} steps, {rules} rules run in {elapsed:.1f} s "
        f"(load {' '.join(f'{x:.2f}' for x in os.getloadavg())}); {queries} queries, {queries / max(1, rules):.1f} per step\nR5 rule hits: {machine.hits_report()}"
    )


def test_every_pause_decide_cancel_timeout_restore_step_leaves_the_database_as_the_model_says(http_recorder):
    run_machine(http_recorder, examples=50, steps=30, derandomize=True)


@pytest.mark.fullsize
def test_full_size_state_machine_conformance(http_recorder):
    examples, steps = (int(x) for x in os.environ.get("HITL_STATE_MACHINE_SIZE", "200x50").split("x"))
    run_machine(http_recorder, examples=examples, steps=steps, derandomize=False)
