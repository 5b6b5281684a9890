"""Behaviour rules, their conditions, and the properties task."""

from __future__ import annotations

from typing import Any

from conversations.pipeline import behavior_rules, properties_task
from conversations.pipeline.builtin_tasks import register_builtin_tasks
from conversations.pipeline.conditions import condition_holds
from conversations.pipeline.conversation_memory import (
    CONVERSATION_START,
    PAUSE_CONVERSATION,
    ConversationMemory,
    Step,
)
from conversations.pipeline.registry import TurnContext, runner_for

TURN = TurnContext({}, "c1")


def step(expressions: list[str] | None = None, actions: list[str] | None = None, **kwargs: Any) -> Step:
    return Step(data={"expressions:parsed": list(expressions or [])}, actions=list(actions or []), **kwargs)


def memory_with(current: Step, previous: list[Step] | None = None, **kwargs: Any) -> ConversationMemory:
    return ConversationMemory("c1", current=current, previous=list(previous or []), **kwargs)


def run_rules(memory: ConversationMemory, rules: list[dict[str, Any]]) -> None:
    behavior_rules.run({"type": "behavior_rules", "rules": rules}, memory, TURN)


def inputmatcher(expressions: str, occurrence: str | None = None) -> dict[str, Any]:
    configs = {"expressions": expressions}
    if occurrence:
        configs["occurrence"] = occurrence
    return {"type": "inputmatcher", "configs": configs}


def actionmatcher(actions: Any, occurrence: str | None = None) -> dict[str, Any]:
    configs = {"actions": actions}
    if occurrence:
        configs["occurrence"] = occurrence
    return {"type": "actionmatcher", "configs": configs}


def test_rule_with_all_conditions_true_appends_actions_and_records_its_name() -> None:
    memory = memory_with(step(["delete_account(me)"], [CONVERSATION_START]))
    run_rules(
        memory,
        [
            {
                "name": "Pause for deletion approval",
                "actions": [PAUSE_CONVERSATION, "confirm_deletion"],
                "conditions": [inputmatcher("delete_account(*)")],
            }
        ],
    )
    assert memory.current.actions == [CONVERSATION_START, PAUSE_CONVERSATION, "confirm_deletion"]
    assert memory.current.data["behavior_rules:fired"] == ["Pause for deletion approval"]


def test_rule_with_one_false_condition_does_not_fire() -> None:
    memory = memory_with(step(["delete_account(me)"]))
    run_rules(
        memory,
        [
            {
                "name": "r",
                "actions": ["a"],
                "conditions": [inputmatcher("delete_account(*)"), inputmatcher("x")],
            }
        ],
    )
    assert memory.current.actions == []
    assert memory.current.data["behavior_rules:fired"] == []


def test_all_rules_are_evaluated_in_order_and_see_actions_of_earlier_rules() -> None:
    memory = memory_with(step(["greeting(hello)"]))
    run_rules(
        memory,
        [
            {"name": "greet", "actions": ["greet", "log"], "conditions": [inputmatcher("greeting(*)")]},
            {"name": "after greet", "actions": ["log", "smile"], "conditions": [actionmatcher("greet")]},
            {"name": "never", "actions": ["nope"], "conditions": [inputmatcher("bye")]},
        ],
    )
    assert memory.current.actions == ["greet", "log", "smile"]
    assert memory.current.data["behavior_rules:fired"] == ["greet", "after greet"]


def test_rule_without_conditions_always_fires() -> None:
    memory = memory_with(step())
    run_rules(memory, [{"name": "default", "actions": ["fallback"]}])
    assert memory.current.actions == ["fallback"]


def test_inputmatcher_requires_every_pattern_to_match_some_expression() -> None:
    memory = memory_with(step(["greeting(hello)", "number(42)"]))
    assert condition_holds(inputmatcher("greeting(*), number(*)"), memory)
    assert not condition_holds(inputmatcher("greeting(*), farewell(*)"), memory)


def test_inputmatcher_occurrences_look_at_the_right_steps() -> None:
    older, last = step(["delete_account(me)"]), step(["greeting(hello)"])
    memory = memory_with(step(["number(1)"]), [older, last])
    assert not condition_holds(inputmatcher("delete_account(*)"), memory)
    assert condition_holds(inputmatcher("greeting(*)", "lastStep"), memory)
    assert not condition_holds(inputmatcher("delete_account(*)", "lastStep"), memory)
    assert condition_holds(inputmatcher("delete_account(*)", "anyStep"), memory)
    assert condition_holds(inputmatcher("number(*)", "anyStep"), memory)
    assert not condition_holds(inputmatcher("delete_account(*)", "never"), memory)
    assert condition_holds(inputmatcher("farewell(*)", "never"), memory)


def test_laststep_occurrence_is_false_on_the_first_turn() -> None:
    memory = memory_with(step(["greeting(hello)"], [CONVERSATION_START]))
    assert not condition_holds(inputmatcher("greeting(*)", "lastStep"), memory)
    assert not condition_holds(actionmatcher(CONVERSATION_START, "lastStep"), memory)


def test_actionmatcher_sees_conversation_start_on_first_turn_and_accepts_lists_or_commas() -> None:
    memory = memory_with(step(actions=[CONVERSATION_START, "greet"]))
    assert condition_holds(actionmatcher(CONVERSATION_START), memory)
    assert condition_holds(actionmatcher("greet, CONVERSATION_START"), memory)
    assert condition_holds(actionmatcher(["greet", CONVERSATION_START]), memory)
    assert not condition_holds(actionmatcher("greet,bye"), memory)


def test_actionmatcher_occurrences() -> None:
    memory = memory_with(step(actions=["now"]), [step(actions=["first"]), step(actions=["before"])])
    assert condition_holds(actionmatcher("before", "lastStep"), memory)
    assert condition_holds(actionmatcher("first", "anyStep"), memory)
    assert condition_holds(actionmatcher("now", "anyStep"), memory)
    assert condition_holds(actionmatcher("other", "never"), memory)
    assert not condition_holds(actionmatcher("first", "never"), memory)


def test_propertymatcher_checks_existence_and_value_as_text() -> None:
    memory = memory_with(step(), properties={"tier": "gold", "count": 3, "vip": True})
    assert condition_holds({"type": "propertymatcher", "configs": {"name": "tier"}}, memory)
    assert not condition_holds({"type": "propertymatcher", "configs": {"name": "absent"}}, memory)
    assert condition_holds({"type": "propertymatcher", "configs": {"name": "tier", "value": "gold"}}, memory)
    assert not condition_holds(
        {"type": "propertymatcher", "configs": {"name": "tier", "value": "silver"}}, memory
    )
    assert condition_holds({"type": "propertymatcher", "configs": {"name": "count", "value": "3"}}, memory)
    assert condition_holds({"type": "propertymatcher", "configs": {"name": "vip", "value": "true"}}, memory)


def test_contextmatcher_string_object_and_expressions() -> None:
    memory = memory_with(
        step(
            context={
                "channel": "web",
                "user": {"profile": {"role": "manager"}},
                "intent": "approve(request), urgent",
            }
        )
    )

    def ctx(**configs: Any) -> dict[str, Any]:
        return {"type": "contextmatcher", "configs": configs}

    assert condition_holds(ctx(contextKey="channel", contextType="string", contextValue="web"), memory)
    assert not condition_holds(ctx(contextKey="channel", contextType="string", contextValue="sms"), memory)
    assert condition_holds(
        ctx(contextKey="user", contextType="object", objectKeyPath="profile.role", objectValue="manager"),
        memory,
    )
    assert not condition_holds(
        ctx(contextKey="user", contextType="object", objectKeyPath="profile.team", objectValue="manager"),
        memory,
    )
    assert condition_holds(
        ctx(contextKey="intent", contextType="expressions", expressions="approve(*)"), memory
    )
    assert not condition_holds(
        ctx(contextKey="intent", contextType="expressions", expressions="deny(*)"), memory
    )
    assert not condition_holds(ctx(contextKey="missing", contextType="string", contextValue=""), memory)


def test_negation_is_true_when_not_all_nested_conditions_hold() -> None:
    memory = memory_with(step(["greeting(hello)"]))
    assert condition_holds({"type": "negation", "conditions": [inputmatcher("bye")]}, memory)
    assert not condition_holds({"type": "negation", "conditions": [inputmatcher("greeting(*)")]}, memory)
    assert condition_holds(
        {"type": "negation", "conditions": [inputmatcher("greeting(*)"), inputmatcher("bye")]}, memory
    )


def test_connector_combines_nested_conditions_with_and_or() -> None:
    memory = memory_with(step(["greeting(hello)"]))
    nested = [inputmatcher("greeting(*)"), inputmatcher("bye")]
    assert condition_holds({"type": "connector", "configs": {"operator": "OR"}, "conditions": nested}, memory)
    assert not condition_holds(
        {"type": "connector", "configs": {"operator": "AND"}, "conditions": nested}, memory
    )


def test_unknown_condition_type_fails_closed() -> None:
    memory = memory_with(step())
    run_rules(memory, [{"name": "r", "actions": ["a"], "conditions": [{"type": "mystery"}]}])
    assert memory.current.actions == []


def test_properties_task_renders_string_values_and_keeps_other_json() -> None:
    memory = memory_with(Step(input="Bob", context={"tier": "gold"}), properties={"greeting": "hi"})
    task = {
        "type": "properties",
        "setProperties": [
            {"name": "userName", "value": "{memory.current.input}"},
            {"name": "label", "value": "{properties.userName} ({context.tier}) says {properties.greeting}"},
            {"name": "limits", "value": {"daily": 100, "tags": ["a"]}},
            {"name": "scratch", "value": "{context.tier}", "scope": "step"},
        ],
    }
    properties_task.run(task, memory, TURN)
    assert memory.properties["userName"] == "Bob"
    assert memory.properties["label"] == "Bob (gold) says hi"
    assert memory.properties["limits"] == {"daily": 100, "tags": ["a"]}
    assert "scratch" not in memory.properties
    assert memory.current.outputs["properties"] == {"scratch": "gold"}
    assert memory.current.data["properties:set"] == ["userName", "label", "limits", "scratch"]


def test_properties_with_actions_apply_only_when_one_of_them_is_in_the_step() -> None:
    memory = memory_with(step(actions=["confirm_deletion"]))
    task = {
        "type": "properties",
        "setProperties": [
            {"name": "deleting", "value": True, "actions": ["confirm_deletion", "other"]},
            {"name": "greeted", "value": True, "actions": ["greet"]},
        ],
    }
    properties_task.run(task, memory, TURN)
    assert memory.properties == {"deleting": True}
    assert memory.current.data["properties:set"] == ["deleting"]


def test_register_builtin_tasks_is_idempotent_and_registers_every_type() -> None:
    register_builtin_tasks()
    register_builtin_tasks()
    for task_type in ("parser", "behavior_rules", "properties", "output", "templating", "httpcalls"):
        runner_for(task_type)  # LookupError when it is not registered
    assert runner_for("behavior_rules") is behavior_rules.run
