"""say does not grow with the conversation: a turn loads a bounded window of steps and the snapshot
returns the newest ``HITL_SNAPSHOT_STEPS`` with ``stepCount``; older steps are read only on demand
(an llm task's longer history, ``anyStep``/``never`` conditions, the recall tool's search)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.memory_store import memory_for_new_turn
from conversations.models import Conversation, ConversationStep
from conversations.pipeline.llm_task import initial_messages
from harnesses.factories import account_bot, deployed_agent, say, start

pytestmark = pytest.mark.django_db
STEPS = ConversationStep._meta.db_table


def grow(conversation_id: str, steps: int) -> None:
    """Make the conversation ``steps`` live steps long: copies of its newest step, as a say makes them."""
    rows = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("index")
    newest = rows.last()
    fields = ("input", "context", "actions", "output", "outputs", "data", "quick_replies", "properties")
    ConversationStep.objects.bulk_create(
        [
            ConversationStep(
                conversation_id=conversation_id, index=index, **{f: getattr(newest, f) for f in fields}
            )
            for index in range(newest.index + 1, steps)
        ]
    )
    Conversation.objects.filter(pk=conversation_id).update(step_count=steps)


def step_rows_read() -> int:
    """Rows of the step table PostgreSQL has read in this transaction (sequential and through indexes)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)"
            " FROM pg_stat_xact_user_tables WHERE relname = %s",
            [STEPS],
        )
        return int(cursor.fetchone()[0])


def measured_say(client, conversation_id: str) -> dict[str, Any]:
    rows_before = step_rows_read()
    with CaptureQueriesContext(connection) as captured:
        answer = say(client, conversation_id, "hello").json()
    assert answer["output"] == ["Hello!"]
    return {
        "queries": len(captured.captured_queries),
        "rows": step_rows_read() - rows_before,
        "answer": answer,
        "sql": [q["sql"] for q in captured.captured_queries],
    }


def test_say_loads_a_bounded_window_of_steps(alice_client, settings):
    settings.HITL_MEMORY_WINDOW_STEPS = 10
    settings.HITL_SNAPSHOT_STEPS = 50
    agent = deployed_agent()
    short, long = start(alice_client, agent), start(alice_client, agent)
    for conversation_id in (short, long):
        say(alice_client, conversation_id, "hello")
    grow(short, 60)  # both longer than the turn's window and the snapshot: the snapshot reads its steps
    grow(long, 200)
    # As autovacuum would: on a table the planner believes empty, a sequential scan is its cheapest plan
    # whatever the query; with statistics it takes the index range the turn asks for.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_conversationstep")

    at_60 = measured_say(alice_client, short)
    at_200 = measured_say(alice_client, long)

    assert at_60["queries"] == at_200["queries"], (at_60["sql"], at_200["sql"])
    # the turn's window (10) and the snapshot's newest 50, each read once: never all 200
    assert at_200["rows"] <= 10 + 50 + 5, at_200["rows"]
    assert at_200["rows"] < 200
    assert at_200["answer"]["stepCount"] == 201 and len(at_200["answer"]["steps"]) == 50
    assert at_60["answer"]["stepCount"] == 61 and len(at_60["answer"]["steps"]) == 50


def test_a_turn_holding_every_shown_step_answers_without_reading_them_back(alice_client, settings):
    """A conversation no longer than the turn's window: the snapshot is built from the turn's memory,
    and it is the snapshot a read gives."""
    settings.HITL_MEMORY_WINDOW_STEPS = 10
    settings.HITL_SNAPSHOT_STEPS = 50
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "hello")
    grow(conversation_id, 5)

    said = measured_say(alice_client, conversation_id)

    step_reads = [sql for sql in said["sql"] if sql.startswith("SELECT") and f'FROM "{STEPS}"' in sql]
    assert len(step_reads) == 1, step_reads  # the turn's window; nothing read back after the commit
    assert said["answer"] == alice_client.get(f"/agents/{conversation_id}").json()
    assert said["answer"]["stepCount"] == 6 and len(said["answer"]["steps"]) == 6


def inputs(snapshot: dict[str, Any]) -> list[str]:
    return [step["input"] for step in snapshot["steps"]]


def test_snapshot_returns_the_newest_steps_and_the_count(alice_client, settings):
    settings.HITL_SNAPSHOT_STEPS = 3
    conversation_id = start(alice_client, deployed_agent())
    first = say(alice_client, conversation_id, "hello 1").json()
    assert (first["stepCount"], inputs(first)) == (2, ["", "hello 1"])  # fewer than 3: all of them
    for n in range(2, 6):
        say(alice_client, conversation_id, f"hello {n}")

    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["stepCount"] == 6  # the start turn and five says
    assert inputs(snapshot) == ["hello 3", "hello 4", "hello 5"]  # the newest, oldest first
    assert snapshot["output"] == ["Hello!"] and snapshot["actions"] == ["say_hello"]  # of the newest step

    undone = alice_client.post(f"/agents/{conversation_id}/undo").json()
    assert (undone["stepCount"], inputs(undone)) == (5, ["hello 2", "hello 3", "hello 4"])
    alice_client.post(f"/agents/{conversation_id}/undo")
    redone = alice_client.post(f"/agents/{conversation_id}/redo").json()
    assert (redone["stepCount"], inputs(redone)) == (5, ["hello 2", "hello 3", "hello 4"])

    said = say(alice_client, conversation_id, "hello again").json()  # drops the redo history (hello 5)
    assert (said["stepCount"], inputs(said)) == (6, ["hello 3", "hello 4", "hello again"])
    assert ConversationStep.objects.filter(conversation_id=conversation_id).count() == 6
    assert alice_client.post(f"/agents/{conversation_id}/redo").status_code == 409  # nothing to redo

    settings.HITL_SNAPSHOT_STEPS = 0
    bare = alice_client.get(f"/agents/{conversation_id}").json()
    assert (bare["stepCount"], bare["steps"], bare["output"]) == (6, [], ["Hello!"])


def test_an_llm_history_longer_than_the_window_is_read_on_demand(alice_client, settings):
    settings.HITL_MEMORY_WINDOW_STEPS = 2
    conversation_id = start(alice_client, deployed_agent())
    for n in range(1, 7):
        say(alice_client, conversation_id, f"hello {n}")
    conversation = Conversation.objects.get(pk=conversation_id)
    memory = memory_for_new_turn(conversation, user_input="now", context={}, caller=None)
    assert [step.input for step in memory.previous] == ["hello 5", "hello 6"]  # the window

    messages = initial_messages({"conversationHistoryLimit": 5}, memory)

    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "hello 2",
        "hello 3",
        "hello 4",
        "hello 5",
        "hello 6",
        "now",
    ]
    assert [step.input for step in memory.every_previous()] == ["", *[f"hello {n}" for n in range(1, 7)]]


def test_any_step_and_never_conditions_see_steps_beyond_the_window(alice_client, settings):
    settings.HITL_MEMORY_WINDOW_STEPS = 1
    document = account_bot()
    document["workflows"][0]["tasks"][1]["rules"] += [
        {
            "name": "Greeted before",
            "actions": ["greeted_before"],
            "conditions": [
                {"type": "inputmatcher", "configs": {"expressions": "greeting(*)", "occurrence": "anyStep"}}
            ],
        },
        {
            "name": "Never asked to delete",
            "actions": ["never_deleting"],
            "conditions": [
                {
                    "type": "inputmatcher",
                    "configs": {"expressions": "delete_account(*)", "occurrence": "never"},
                }
            ],
        },
    ]
    conversation_id = start(alice_client, deployed_agent(document))
    say(alice_client, conversation_id, "hello")
    for _ in range(3):
        latest = say(alice_client, conversation_id, "something else").json()
    assert latest["actions"] == ["greeted_before", "never_deleting"]  # "hello" is three steps back


def test_recall_searches_every_earlier_step_in_the_database(alice_client, settings):
    settings.HITL_MEMORY_WINDOW_STEPS = 1
    conversation_id = start(alice_client, deployed_agent())
    for text in ("my order is 4711", "Hello there", "hello order 4711 again", "ORDER 4711 once more"):
        say(alice_client, conversation_id, text)
    conversation = Conversation.objects.get(pk=conversation_id)
    memory = memory_for_new_turn(conversation, user_input="search", context={}, caller=None)

    assert memory.search_history("order 4711", 5) == [
        {"turn": 3, "input": "hello order 4711 again", "output": ["Hello!"]},
        {"turn": 4, "input": "ORDER 4711 once more", "output": []},
    ]
    assert [hit["turn"] for hit in memory.search_history("4711", 1)] == [4]  # the newest matches
    assert memory.search_history("there hello!", 5) == [
        {"turn": 2, "input": "Hello there", "output": ["Hello!"]}
    ]  # input and output joined by a space
    assert memory.search_history("50%", 5) == []
    assert (
        memory.previous[0].input == "ORDER 4711 once more" and memory.first_index == 4
    )  # nothing else loaded
