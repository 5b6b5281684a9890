"""The output task (texts per action) and templating (placeholders)."""

from __future__ import annotations

from conversations.pipeline import output_task, templating
from conversations.pipeline.conversation_memory import ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from conversations.pipeline.templating import render

TURN = TurnContext({}, "c1")

DATA = {
    "memory": {
        "current": {
            "input": "hi",
            "hitlDecision": "approved",
            "payments": {"status": 201, "body": {"id": "p-7"}},
        },
        "last": {"input": "before"},
    },
    "properties": {"name": "Ada", "tags": ["a", "b"], "count": 3, "vip": True, "none": None},
    "context": {"channel": "web", "items": [{"sku": "x1"}]},
}


def test_known_roots_and_deep_paths_are_replaced() -> None:
    assert render("Deletion {memory.current.hitlDecision}.", DATA) == "Deletion approved."
    assert render("{memory.last.input}/{properties.name}/{context.channel}", DATA) == "before/Ada/web"
    assert render("id={memory.current.payments.body.id}", DATA) == "id=p-7"
    assert render("{context.items.0.sku}", DATA) == "x1"


def test_missing_path_renders_as_empty_string() -> None:
    assert render("[{properties.absent}][{memory.current.payments.body.nope}][{args.x}]", DATA) == "[][][]"
    assert render("[{properties.none}]", DATA) == "[]"


def test_dicts_and_lists_render_as_compact_json_and_scalars_as_text() -> None:
    assert render("{memory.current.payments.body}", DATA) == '{"id":"p-7"}'
    assert render("{properties.tags} {properties.count} {properties.vip}", DATA) == '["a","b"] 3 true'


def test_double_braces_escape_placeholders() -> None:
    assert (
        render("{{memory.current.input}} is {memory.current.input}", DATA) == "{memory.current.input} is hi"
    )
    assert render("{{literal}}", DATA) == "{literal}"


def test_text_that_is_not_a_known_placeholder_is_left_alone() -> None:
    body = '{"user": {"name": "{properties.name}"}, "x": {unknown.path}, "y": {memory}}'
    assert render(body, {"properties": {"name": "Ada"}}) == (
        '{"user": {"name": "Ada"}, "x": {unknown.path}, "y": }'
    )
    assert render('{"a": {"b": 1}}', DATA) == '{"a": {"b": 1}}'


def test_output_appends_all_texts_of_every_matching_entry_in_action_order() -> None:
    memory = ConversationMemory("c1", current=Step(actions=["second", "first", "silent"]))
    task = {
        "type": "output",
        "outputs": [
            {"action": "first", "texts": ["One.", "Uno."]},
            {
                "action": "second",
                "texts": ["Two {properties.name}."],
                "quickReplies": [{"value": "Yes {properties.name}", "expressions": "confirm(yes)"}],
            },
            {"action": "first", "texts": ["Eins."]},
            {"action": "unused", "texts": ["Never."]},
        ],
    }
    output_task.run(task, memory, TURN)
    assert memory.current.output == ["Two {properties.name}.", "One.", "Uno.", "Eins."]
    assert memory.current.outputs["output"] == memory.current.output
    assert memory.current.quick_replies == [{"value": "Yes {properties.name}", "expressions": "confirm(yes)"}]


def test_output_without_matching_actions_leaves_an_empty_mirror() -> None:
    memory = ConversationMemory("c1", current=Step(actions=["x"]))
    output_task.run({"type": "output", "outputs": [{"action": "y", "texts": ["no"]}]}, memory, TURN)
    assert memory.current.output == []
    assert memory.current.outputs["output"] == []


def test_templating_task_renders_output_mirror_and_quick_replies() -> None:
    memory = ConversationMemory(
        "c1",
        current=Step(input="delete", actions=["confirm_deletion"], outputs={"hitlDecision": "approved"}),
        previous=[Step(input="hello")],
        properties={"name": "Ada"},
    )
    output_task.run(
        {
            "type": "output",
            "outputs": [
                {
                    "action": "confirm_deletion",
                    "texts": [
                        "Deletion {memory.current.hitlDecision}, {properties.name} (was {memory.last.input})."
                    ],
                    "quickReplies": [{"value": "Thanks {properties.name}", "expressions": "thanks"}],
                }
            ],
        },
        memory,
        TURN,
    )
    templating.run({"type": "templating"}, memory, TURN)
    assert memory.current.output == ["Deletion approved, Ada (was hello)."]
    assert memory.current.outputs["output"] == ["Deletion approved, Ada (was hello)."]
    assert memory.current.quick_replies == [{"value": "Thanks Ada", "expressions": "thanks"}]


def test_output_task_does_not_share_quick_reply_dicts_with_the_document() -> None:
    task = {
        "type": "output",
        "outputs": [{"action": "a", "texts": [], "quickReplies": [{"value": "{properties.n}"}]}],
    }
    memory = ConversationMemory("c1", current=Step(actions=["a"]), properties={"n": "1"})
    output_task.run(task, memory, TURN)
    templating.run({"type": "templating"}, memory, TURN)
    assert memory.current.quick_replies == [{"value": "1"}]
    assert task["outputs"][0]["quickReplies"] == [{"value": "{properties.n}"}]
