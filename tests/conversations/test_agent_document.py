"""Save-time validation of whole agent documents: every error at once, under its full field path."""

from __future__ import annotations

from typing import Any

import pytest

from common.edit_distance import levenshtein, near_miss
from common.field_errors import FieldError
from conversations.agent_document import validate_agent_document
from conversations.demo_agent import demo_agent_document
from conversations.document_fields import DocumentReport
from conversations.pipeline.conversation_memory import RESERVED_ACTIONS

T0 = "workflows[0].tasks[0]"


def agent(*tasks: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "bot", "workflows": [{"id": "main", "tasks": list(tasks)}], **top}


def rules_task(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"id": "rules", "type": "behavior_rules", "rules": list(rules)}


def rule(*conditions: dict[str, Any], actions: list[str] | None = None) -> dict[str, Any]:
    return {"name": "r", "actions": actions or ["act"], "conditions": list(conditions)}


def http_task(*calls: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {
        "id": "api",
        "type": "httpcalls",
        "targetServerUrl": "https://api.example.com",
        "calls": list(calls),
    } | (config)


def http_call(**config: Any) -> dict[str, Any]:
    return {"name": "transfer", "request": {"method": "POST", "path": "/transfers"}} | config


def llm_task(**config: Any) -> dict[str, Any]:
    return {"id": "assistant", "type": "llm", "provider": {"type": "openai", "model": "gpt-4o-mini"}} | config


def errors_of(doc: object) -> list[FieldError]:
    return validate_agent_document(doc).errors


def fields(findings: list[FieldError]) -> list[str]:
    return [finding.field for finding in findings]


def only_error(doc: object) -> FieldError:
    errors = errors_of(doc)
    assert len(errors) == 1, errors
    return errors[0]


# --- the document as a whole ---------------------------------------------------------------------------


def test_the_demo_agent_is_valid_without_warnings() -> None:
    report = validate_agent_document(demo_agent_document())
    assert report.ok
    assert report.errors == []
    assert report.warnings == []


def test_every_error_of_the_document_is_reported_at_once_with_its_full_path() -> None:
    doc = demo_agent_document()
    doc["name"] = ""
    tasks = doc["workflows"][0]["tasks"]
    tasks[0]["dictionaries"][1]["word"] = "two words"
    tasks[1]["rules"][0]["conditions"][0]["configs"]["expressions"] = "delete_account(("
    tasks[2]["outputs"][0]["texts"] = []
    doc["hitlConfig"]["approvalTimeout"] = "30m"
    report = validate_agent_document(doc)
    assert not report.ok
    assert fields(report.errors) == [
        "name",
        "workflows[0].tasks[0].dictionaries[1].word",
        "workflows[0].tasks[1].rules[0].conditions[0].configs.expressions",
        "workflows[0].tasks[2].outputs[0].texts",
        "hitlConfig.approvalTimeout",
    ]


@pytest.mark.parametrize("doc", [None, [], "agent", 3])
def test_a_document_that_is_not_an_object_is_refused(doc: object) -> None:
    assert errors_of(doc) == [FieldError("", "the agent document must be a JSON object")]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (None, "is required"),
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        (7, "must be a string, got number"),
    ],
)
def test_the_name_must_be_a_non_empty_string(name: object, message: str) -> None:
    doc = agent()
    doc["name"] = name
    assert errors_of(doc) == [FieldError("name", message)]


def test_the_name_may_have_200_characters_but_not_201() -> None:
    assert errors_of(agent(name="n" * 200)) == []
    assert fields(errors_of(agent(name="n" * 201))) == ["name"]


def test_a_description_must_be_a_string() -> None:
    assert errors_of(agent(description="Deletes accounts")) == []
    assert fields(errors_of(agent(description=["x"]))) == ["description"]


@pytest.mark.parametrize("workflows", [None, [], {"id": "main"}])
def test_workflows_must_be_a_non_empty_list(workflows: object) -> None:
    doc = {"name": "bot", "workflows": workflows}
    assert fields(errors_of(doc)) == ["workflows"]


def test_an_unknown_top_level_key_is_refused_naming_it_and_the_allowed_keys() -> None:
    """S2 (mass assignment): a body's field outside the contract is never stored; a near miss is named."""
    report = validate_agent_document(agent(colour="blue", hitlconfig={}))
    assert not report.ok
    assert fields(report.errors) == ["colour", "hitlconfig"]
    assert "did you mean 'hitlConfig'?" in report.errors[1].message
    assert "allowed: name, description, workflows, hitlConfig" in report.errors[0].message


def test_hitl_config_errors_are_reported_with_the_hitl_config_path() -> None:
    doc = agent(rules_task(rule(actions=["PAUSE_CONVERSATION"])), hitlConfig={"timeoutPolicy": "ABORT"})
    error = only_error(doc)
    assert error.field == "hitlConfig.approvalTimeout"
    assert error.message.startswith("hitlConfig: a finite timeoutPolicy (AUTO_APPROVE/AUTO_REJECT/ABORT)")


def test_a_report_is_ok_only_without_errors() -> None:
    assert DocumentReport().ok
    assert DocumentReport(warnings=[FieldError("x", "y")]).ok
    assert not DocumentReport(errors=[FieldError("x", "y")]).ok


# --- workflows and tasks --------------------------------------------------------------------------------


@pytest.mark.parametrize("workflow_id", [None, "", "main flow", "main/1"])
def test_a_workflow_id_is_a_non_empty_identifier(workflow_id: object) -> None:
    doc = {"name": "bot", "workflows": [{"id": workflow_id, "tasks": []}]}
    assert fields(errors_of(doc)) == ["workflows[0].id"]


def test_workflow_ids_are_unique() -> None:
    doc = {"name": "bot", "workflows": [{"id": "main", "tasks": []}, {"id": "main", "tasks": []}]}
    error = only_error(doc)
    assert error.field == "workflows[1].id"
    assert "duplicate workflow id 'main'" in error.message


def test_a_workflow_needs_a_task_list_which_may_be_empty() -> None:
    assert errors_of({"name": "bot", "workflows": [{"id": "main", "tasks": []}]}) == []
    assert fields(errors_of({"name": "bot", "workflows": [{"id": "main"}]})) == ["workflows[0].tasks"]


def test_task_ids_are_unique_within_a_workflow_but_not_across_workflows() -> None:
    templating = {"id": "t", "type": "templating"}
    error = only_error(agent(templating, templating))
    assert error.field == "workflows[0].tasks[1].id"
    doc = {
        "name": "bot",
        "workflows": [{"id": "a", "tasks": [templating]}, {"id": "b", "tasks": [templating]}],
    }
    assert errors_of(doc) == []


@pytest.mark.parametrize("task_type", [None, "chatgpt", "Parser"])
def test_a_task_type_must_be_a_known_one(task_type: object) -> None:
    error = only_error(agent({"id": "x", "type": task_type}))
    assert error.field == f"{T0}.type"
    assert "parser, behavior_rules, properties, output, templating, httpcalls, llm" in error.message


def test_a_task_without_an_id_is_refused() -> None:
    assert fields(errors_of(agent({"type": "templating"}))) == [f"{T0}.id"]


def test_an_unknown_task_key_is_a_warning() -> None:
    report = validate_agent_document(agent({"id": "t", "type": "templating", "dictionaries": []}))
    assert report.ok
    assert fields(report.warnings) == [f"{T0}.dictionaries"]


def test_templating_needs_no_configuration() -> None:
    assert validate_agent_document(agent({"id": "t", "type": "templating"})) == DocumentReport()


# --- parser ---------------------------------------------------------------------------------------------


def parser(*entries: object) -> dict[str, Any]:
    return {"id": "parse", "type": "parser", "dictionaries": list(entries)}


def test_dictionary_entries_may_be_words_phrases_or_regexes() -> None:
    doc = agent(
        parser(
            {"word": "hello", "expressions": "greeting(hello)"},
            {"phrase": "delete my account", "expressions": "delete_account(me)"},
            {"regex": r"\d{4}", "expressions": "year"},
        )
    )
    assert errors_of(doc) == []


def test_a_parser_needs_a_dictionary_list() -> None:
    assert fields(errors_of(agent({"id": "p", "type": "parser"}))) == [f"{T0}.dictionaries"]


def test_a_dictionary_word_may_not_contain_whitespace() -> None:
    error = only_error(agent(parser({"word": "good morning", "expressions": "greeting"})))
    assert error.field == f"{T0}.dictionaries[0].word"
    assert "phrase" in error.message


def test_a_dictionary_phrase_must_not_be_empty() -> None:
    assert fields(errors_of(agent(parser({"phrase": " ", "expressions": "x"})))) == [
        f"{T0}.dictionaries[0].phrase"
    ]


def test_a_dictionary_regex_must_compile() -> None:
    error = only_error(agent(parser({"regex": "([a-z", "expressions": "x"})))
    assert error.field == f"{T0}.dictionaries[0].regex"
    assert "not a valid regular expression" in error.message


def test_a_dictionary_entry_is_exactly_one_of_word_phrase_or_regex() -> None:
    assert fields(errors_of(agent(parser({"expressions": "x"})))) == [f"{T0}.dictionaries[0]"]
    both = only_error(agent(parser({"word": "hi", "phrase": "hi there", "expressions": "x"})))
    assert both.field == f"{T0}.dictionaries[0]"
    assert "has both 'word' and 'phrase'" in both.message


@pytest.mark.parametrize(
    ("expressions", "message_part"),
    [
        (None, "is required"),
        ("", "must not be empty"),
        ("greeting(hello", "missing ')'"),
        ("a b", "unexpected 'b'"),
    ],
)
def test_dictionary_expressions_must_parse(expressions: object, message_part: str) -> None:
    error = only_error(agent(parser({"word": "hi", "expressions": expressions})))
    assert error.field == f"{T0}.dictionaries[0].expressions"
    assert message_part in error.message


# --- behavior rules ---------------------------------------------------------------------------------------


def test_a_rule_without_conditions_always_fires_and_is_valid() -> None:
    assert errors_of(agent(rules_task({"name": "always", "actions": ["greet"], "conditions": []}))) == []
    assert errors_of(agent(rules_task({"name": "always", "actions": ["greet"]}))) == []


@pytest.mark.parametrize(
    ("actions", "bad_field"),
    [
        (None, "rules[0].actions"),
        ([], "rules[0].actions"),
        ("greet", "rules[0].actions"),
        (["greet", ""], "rules[0].actions[1]"),
        (["greet", 3], "rules[0].actions[1]"),
    ],
)
def test_rule_actions_are_a_non_empty_list_of_non_empty_strings(actions: object, bad_field: str) -> None:
    doc = agent(rules_task({"name": "r", "actions": actions, "conditions": []}))
    assert fields(errors_of(doc)) == [f"{T0}.{bad_field}"]


def test_a_rule_needs_a_name() -> None:
    assert fields(errors_of(agent(rules_task({"actions": ["a"]})))) == [f"{T0}.rules[0].name"]


def test_every_condition_type_with_its_configuration_is_accepted() -> None:
    doc = agent(
        rules_task(
            rule(
                {
                    "type": "inputmatcher",
                    "configs": {"expressions": "delete_account(*)", "occurrence": "anyStep"},
                },
                {"type": "actionmatcher", "configs": {"actions": "greet, confirm", "occurrence": "lastStep"}},
                {"type": "actionmatcher", "configs": {"actions": ["greet"]}},
                {"type": "propertymatcher", "configs": {"name": "tier"}},
                {"type": "propertymatcher", "configs": {"name": "tier", "value": "gold"}},
                {"type": "contextmatcher", "configs": {"contextKey": "channel", "contextValue": "web"}},
                {
                    "type": "contextmatcher",
                    "configs": {
                        "contextKey": "user",
                        "contextType": "object",
                        "objectKeyPath": "role.name",
                        "objectValue": "admin",
                    },
                },
                {
                    "type": "contextmatcher",
                    "configs": {
                        "contextKey": "intent",
                        "contextType": "expressions",
                        "expressions": "buy(*)",
                    },
                },
                {"type": "negation", "conditions": [{"type": "actionmatcher", "configs": {"actions": "x"}}]},
                {
                    "type": "connector",
                    "configs": {"operator": "OR"},
                    "conditions": [
                        {"type": "inputmatcher", "configs": {"expressions": "yes"}},
                        {"type": "inputmatcher", "configs": {"expressions": "no", "occurrence": "never"}},
                    ],
                },
            )
        )
    )
    assert errors_of(doc) == []


def test_an_unknown_condition_type_is_refused() -> None:
    error = only_error(agent(rules_task(rule({"type": "timematcher", "configs": {}}))))
    assert error.field == f"{T0}.rules[0].conditions[0].type"


def test_an_input_matcher_needs_expressions_that_parse() -> None:
    doc = agent(rules_task(rule({"type": "inputmatcher", "configs": {"expressions": "delete_account(("}})))
    error = only_error(doc)
    assert error.field == f"{T0}.rules[0].conditions[0].configs.expressions"
    assert "is not a valid expression list" in error.message
    doc = agent(rules_task(rule({"type": "inputmatcher", "configs": {}})))
    assert fields(errors_of(doc)) == [f"{T0}.rules[0].conditions[0].configs.expressions"]


def test_a_condition_needs_configs() -> None:
    doc = agent(rules_task(rule({"type": "inputmatcher"})))
    assert fields(errors_of(doc)) == [f"{T0}.rules[0].conditions[0].configs"]


@pytest.mark.parametrize("condition_type", ["inputmatcher", "actionmatcher"])
def test_an_unknown_occurrence_is_refused(condition_type: str) -> None:
    configs = {"expressions": "x", "actions": "x", "occurrence": "everyStep"}
    error = only_error(agent(rules_task(rule({"type": condition_type, "configs": configs}))))
    assert error.field == f"{T0}.rules[0].conditions[0].configs.occurrence"
    assert "currentStep, lastStep, anyStep, never" in error.message


@pytest.mark.parametrize("actions", ["", " , ", [], None, [""]])
def test_an_action_matcher_needs_at_least_one_action(actions: object) -> None:
    doc = agent(rules_task(rule({"type": "actionmatcher", "configs": {"actions": actions}})))
    assert errors_of(doc)
    assert all(f.startswith(f"{T0}.rules[0].conditions[0].configs.actions") for f in fields(errors_of(doc)))


def test_a_property_matcher_needs_a_property_name() -> None:
    doc = agent(rules_task(rule({"type": "propertymatcher", "configs": {"value": "gold"}})))
    assert fields(errors_of(doc)) == [f"{T0}.rules[0].conditions[0].configs.name"]


@pytest.mark.parametrize(
    ("configs", "missing"),
    [
        ({}, ["contextKey", "contextValue"]),
        ({"contextKey": "k", "contextType": "string"}, ["contextValue"]),
        ({"contextKey": "k", "contextType": "object"}, ["objectKeyPath", "objectValue"]),
        ({"contextKey": "k", "contextType": "expressions"}, ["expressions"]),
        ({"contextKey": "k", "contextType": "expressions", "expressions": "a(("}, ["expressions"]),
        ({"contextKey": "k", "contextType": "number", "contextValue": "1"}, ["contextType"]),
    ],
)
def test_a_context_matcher_needs_what_its_context_type_compares(configs: dict, missing: list[str]) -> None:
    doc = agent(rules_task(rule({"type": "contextmatcher", "configs": configs})))
    assert fields(errors_of(doc)) == [f"{T0}.rules[0].conditions[0].configs.{key}" for key in missing]


@pytest.mark.parametrize("condition_type", ["negation", "connector"])
@pytest.mark.parametrize("nested", [None, []])
def test_negations_and_connectors_need_nested_conditions(condition_type: str, nested: object) -> None:
    doc = agent(
        rules_task(rule({"type": condition_type, "configs": {"operator": "AND"}, "conditions": nested}))
    )
    assert fields(errors_of(doc)) == [f"{T0}.rules[0].conditions[0].conditions"]


def test_a_connector_operator_is_and_or_or() -> None:
    nested = [{"type": "actionmatcher", "configs": {"actions": "a"}}]
    doc = agent(rules_task(rule({"type": "connector", "configs": {"operator": "XOR"}, "conditions": nested})))
    error = only_error(doc)
    assert error.field == f"{T0}.rules[0].conditions[0].configs.operator"
    assert "must be one of AND, OR" in error.message


def test_nested_conditions_are_validated_with_their_full_path() -> None:
    doc = agent(
        rules_task(
            rule(
                {
                    "type": "negation",
                    "conditions": [
                        {
                            "type": "connector",
                            "configs": {"operator": "AND"},
                            "conditions": [
                                {"type": "inputmatcher", "configs": {"expressions": "ok"}},
                                {"type": "inputmatcher", "configs": {"expressions": "bad(("}},
                            ],
                        }
                    ],
                }
            )
        )
    )
    assert fields(errors_of(doc)) == [
        f"{T0}.rules[0].conditions[0].conditions[0].conditions[1].configs.expressions"
    ]


def test_absurdly_deep_nesting_is_refused_instead_of_crashing() -> None:
    condition: dict[str, Any] = {"type": "actionmatcher", "configs": {"actions": "a"}}
    for _ in range(2000):
        condition = {"type": "negation", "conditions": [condition]}
    errors = errors_of(agent(rules_task(rule(condition))))
    assert len(errors) == 1
    assert "nested deeper than 64 levels" in errors[0].message  # common.body_rules, before any other check


# --- properties -------------------------------------------------------------------------------------------


def properties(*entries: object) -> dict[str, Any]:
    return {"id": "props", "type": "properties", "setProperties": list(entries)}


def test_set_properties_accepts_any_json_value_scope_and_actions() -> None:
    doc = agent(
        properties(
            {"name": "tier", "value": "{memory.current.input}"},
            {"name": "limits", "value": {"daily": 100}, "scope": "step", "actions": ["upgrade"]},
            {"name": "cleared", "value": None, "scope": "conversation"},
        )
    )
    assert errors_of(doc) == []


@pytest.mark.parametrize(
    ("entry", "bad_field"),
    [
        ({"value": 1}, "setProperties[0].name"),
        ({"name": "", "value": 1}, "setProperties[0].name"),
        ({"name": "tier"}, "setProperties[0].value"),
        ({"name": "tier", "value": 1, "scope": "agent"}, "setProperties[0].scope"),
        ({"name": "tier", "value": 1, "actions": "upgrade"}, "setProperties[0].actions"),
        ({"name": "tier", "value": 1, "actions": [1]}, "setProperties[0].actions[0]"),
        ("tier=gold", "setProperties[0]"),
    ],
)
def test_a_property_entry_is_checked(entry: object, bad_field: str) -> None:
    assert fields(errors_of(agent(properties(entry)))) == [f"{T0}.{bad_field}"]


# --- output -----------------------------------------------------------------------------------------------


def output(*entries: object) -> dict[str, Any]:
    return {"id": "out", "type": "output", "outputs": list(entries)}


def test_outputs_with_quick_replies_are_valid() -> None:
    doc = agent(
        output(
            {
                "action": "confirm_deletion",
                "texts": ["Sure?"],
                "quickReplies": [{"value": "Yes", "expressions": "confirm(yes)"}, {"value": "No"}],
            }
        )
    )
    assert errors_of(doc) == []


@pytest.mark.parametrize(
    ("entry", "bad_field"),
    [
        ({"texts": ["x"]}, "outputs[0].action"),
        ({"action": "", "texts": ["x"]}, "outputs[0].action"),
        ({"action": "a"}, "outputs[0].texts"),
        ({"action": "a", "texts": []}, "outputs[0].texts"),
        ({"action": "a", "texts": [1]}, "outputs[0].texts[0]"),
        ({"action": "a", "texts": ["x"], "quickReplies": {}}, "outputs[0].quickReplies"),
        (
            {"action": "a", "texts": ["x"], "quickReplies": [{"expressions": "x"}]},
            "outputs[0].quickReplies[0].value",
        ),
        (
            {"action": "a", "texts": ["x"], "quickReplies": [{"value": "Yes", "expressions": "yes(("}]},
            "outputs[0].quickReplies[0].expressions",
        ),
    ],
)
def test_an_output_entry_is_checked(entry: object, bad_field: str) -> None:
    assert fields(errors_of(agent(output(entry)))) == [f"{T0}.{bad_field}"]


@pytest.mark.parametrize(
    "expressions",
    ["PAUSE_CONVERSATION", "pause_conversation", "confirm, STOP_CONVERSATION", "reply(conversation_end)"],
)
def test_a_reserved_action_as_a_quick_reply_expression_is_an_error(expressions: str) -> None:
    doc = agent(
        output({"action": "a", "texts": ["x"], "quickReplies": [{"value": "Go", "expressions": expressions}]})
    )
    error = only_error(doc)
    assert error.field == f"{T0}.outputs[0].quickReplies[0].expressions"
    assert "reserved action" in error.message
    assert "quick-reply expression" in error.message


# --- httpcalls --------------------------------------------------------------------------------------------


def test_the_documented_httpcalls_shape_is_valid() -> None:
    call = {
        "name": "transfer",
        "description": "Transfer money",
        "actions": ["do_transfer"],
        "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}},
        "request": {
            "method": "post",
            "path": "/accounts/{args.account}/transfers",
            "headers": {"Authorization": "Bearer ${caller:token}", "X-Api-Key": "${vault:PAYMENTS_KEY}"},
            "queryParams": {"dryRun": "false", "tag": ["a", "b"]},
            "body": {"amount": "{args.amount}"},
        },
        "preRequest": {},
        "postResponse": {},
        "fireAndForget": False,
    }
    doc = agent(http_task(call, targetServerUrl="https://${env:PAYMENTS_HOST}/v1"))
    assert validate_agent_document(doc) == DocumentReport()


@pytest.mark.parametrize(
    "url", ["https://api.example.com", "http://127.0.0.1:8080/base", "${env:PAYMENTS_URL}"]
)
def test_a_target_server_url_is_an_http_url_or_a_secret_reference(url: str) -> None:
    assert errors_of(agent(http_task(http_call(), targetServerUrl=url))) == []


@pytest.mark.parametrize("url", [None, "", "ftp://files.example.com", "api.example.com", "https://"])
def test_a_target_server_url_that_is_not_http_is_refused(url: object) -> None:
    assert fields(errors_of(agent(http_task(http_call(), targetServerUrl=url)))) == [f"{T0}.targetServerUrl"]


def test_calls_may_come_from_an_openapi_document_instead() -> None:
    task = {
        "id": "api",
        "type": "httpcalls",
        "targetServerUrl": "https://a.example",
        "openapi": {"openapi": "3.0.0"},
    }
    assert errors_of(agent(task)) == []
    del task["openapi"]
    assert fields(errors_of(agent(task))) == [f"{T0}.calls"]
    task["openapi"] = "https://a.example/openapi.json"
    assert fields(errors_of(agent(task))) == [f"{T0}.openapi", f"{T0}.calls"]


def test_call_names_are_unique_identifiers() -> None:
    error = only_error(agent(http_task(http_call(), http_call())))
    assert error.field == f"{T0}.calls[1].name"
    assert "duplicate call name 'transfer'" in error.message
    assert fields(errors_of(agent(http_task(http_call(name="send money"))))) == [f"{T0}.calls[0].name"]
    assert fields(errors_of(agent(http_task(http_call(name=None))))) == [f"{T0}.calls[0].name"]


@pytest.mark.parametrize(
    ("call", "bad_field"),
    [
        ({"name": "c"}, "calls[0].request"),
        ({"name": "c", "request": {"method": "FETCH"}}, "calls[0].request.method"),
        ({"name": "c", "request": {"path": 3}}, "calls[0].request.path"),
        ({"name": "c", "request": {"headers": {"X-Count": 3}}}, "calls[0].request.headers.X-Count"),
        ({"name": "c", "request": {"headers": ["X-A: b"]}}, "calls[0].request.headers"),
        ({"name": "c", "request": {"queryParams": {"page": 2}}}, "calls[0].request.queryParams.page"),
        ({"name": "c", "request": {"body": 42}}, "calls[0].request.body"),
        ({"name": "c", "request": {}, "description": 1}, "calls[0].description"),
        ({"name": "c", "request": {}, "actions": "go"}, "calls[0].actions"),
        ({"name": "c", "request": {}, "parameters": "amount"}, "calls[0].parameters"),
        ({"name": "c", "request": {}, "preRequest": []}, "calls[0].preRequest"),
        ({"name": "c", "request": {}, "postResponse": "x"}, "calls[0].postResponse"),
        ({"name": "c", "request": {}, "fireAndForget": "yes"}, "calls[0].fireAndForget"),
    ],
)
def test_a_call_is_checked(call: dict[str, Any], bad_field: str) -> None:
    assert fields(errors_of(agent(http_task(call)))) == [f"{T0}.{bad_field}"]


@pytest.mark.parametrize("method", ["get", "POST", "Put", "patch", "DELETE", "head", "OPTIONS", None])
def test_http_methods_are_case_insensitive_and_default_to_get(method: str | None) -> None:
    assert errors_of(agent(http_task({"name": "c", "request": {"method": method, "path": "/"}}))) == []


@pytest.mark.parametrize("body", [None, "raw {args.x}", {"a": 1}, [1, 2]])
def test_a_request_body_is_a_string_an_object_a_list_or_null(body: object) -> None:
    assert errors_of(agent(http_task({"name": "c", "request": {"body": body}}))) == []


@pytest.mark.parametrize(
    ("request_config", "bad_field"),
    [
        ({"path": "/users/${caller:token}"}, "calls[0].request.path"),
        ({"queryParams": {"token": "${caller:token}"}}, "calls[0].request.queryParams.token"),
        ({"body": {"auth": "${caller:token}"}}, "calls[0].request.body.auth"),
        ({"body": "token=${caller:token}"}, "calls[0].request.body"),
    ],
)
def test_caller_token_outside_a_request_header_is_an_error(request_config: dict, bad_field: str) -> None:
    error = only_error(agent(http_task({"name": "c", "request": request_config})))
    assert error == FieldError(f"{T0}.{bad_field}", "${caller:token} may only be used in request headers")


def test_caller_token_in_the_target_url_or_another_task_is_an_error() -> None:
    doc = agent(http_task(http_call(), targetServerUrl="https://a.example/${caller:token}"))
    assert errors_of(doc) == [
        FieldError(f"{T0}.targetServerUrl", "${caller:token} may only be used in request headers")
    ]
    doc = agent(llm_task(provider={"type": "openai", "model": "m", "apiKey": "${caller:token}"}))
    assert fields(errors_of(doc)) == [f"{T0}.provider.apiKey"]


def test_caller_token_in_a_request_header_is_allowed() -> None:
    call = {"name": "c", "request": {"headers": {"Authorization": "Bearer ${caller:token}"}}}
    assert errors_of(agent(http_task(call))) == []


@pytest.mark.parametrize(
    "value",
    ["${vault:}", "${vault:PAY KEY}", "${vault:PAYMENTS_KEY", "${env:" + "N" * 129 + "}", "${vault:a/b}"],
)
def test_a_malformed_secret_reference_is_an_error(value: str) -> None:
    error = only_error(agent(http_task({"name": "c", "request": {"headers": {"X-Key": value}}})))
    assert error.field == f"{T0}.calls[0].request.headers.X-Key"
    assert "malformed secret reference" in error.message


def test_an_unknown_caller_reference_is_an_error() -> None:
    error = only_error(agent(http_task({"name": "c", "request": {"headers": {"X-User": "${caller:name}"}}})))
    assert "only ${caller:token} exists" in error.message


@pytest.mark.parametrize(
    "value", ["${vault:PAYMENTS_KEY}", "${env:a.b-c_1}", "${env:" + "N" * 128 + "}", "cost ${5}"]
)
def test_well_formed_secret_references_are_accepted(value: str) -> None:
    assert errors_of(agent(http_task({"name": "c", "request": {"headers": {"X-Key": value}}}))) == []


# --- llm --------------------------------------------------------------------------------------------------


def test_the_documented_llm_task_is_valid() -> None:
    task = llm_task(
        provider={
            "type": "openai",
            "model": "gpt-4o-mini",
            "baseUrl": "https://x/v1",
            "apiKey": "${env:OPENAI_API_KEY}",
        },
        systemMessage="You help with payments.",
        tools={
            "builtin": ["getCurrentDateTime"],
            "http": ["payments"],
            "mcp": [{"name": "crm", "url": "http://x/mcp"}],
        },
        toolApprovals={"requireApproval": ["transfer_*"]},
        maxToolIterations=8,
    )
    payments = {
        "id": "payments",
        "type": "httpcalls",
        "targetServerUrl": "https://payments.example/api",
        "calls": [
            {
                "name": "transfer_funds",
                "parameters": {"type": "object"},
                "request": {"method": "POST", "path": "/transfers"},
            }
        ],
    }
    assert validate_agent_document(agent(task, payments)) == DocumentReport()


def test_an_llm_task_naming_an_unknown_httpcalls_task_is_an_error() -> None:
    task = llm_task(provider={"type": "scripted", "script": []}, tools={"http": ["nowhere"]})
    assert any("nowhere" in e.message for e in validate_agent_document(agent(task)).errors)


def test_a_scripted_provider_is_valid() -> None:
    script = [
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "c1", "name": "transfer", "arguments": {"amount": 5}}],
        },
        {"when": {"afterToolResults": True}, "reply": "Done: {toolResults}"},
        {"reply": "How can I help?"},
    ]
    assert errors_of(agent(llm_task(provider={"type": "scripted", "script": script}))) == []


@pytest.mark.parametrize(
    ("provider", "bad_fields"),
    [
        (None, ["provider"]),
        ({"type": "anthropic", "model": "m"}, ["provider.type"]),
        ({"type": "openai"}, ["provider.model"]),
        ({"type": "scripted"}, ["provider.script"]),
        ({"type": "scripted", "script": ["hi"]}, ["provider.script[0]"]),
        ({"type": "scripted", "script": [{}]}, ["provider.script[0]"]),
        ({"type": "scripted", "script": [{"reply": "a", "toolCalls": []}]}, ["provider.script[0]"]),
        (
            {"type": "scripted", "script": [{"toolCalls": [{"id": "1"}]}]},
            ["provider.script[0].toolCalls[0].name"],
        ),
        (
            {"type": "scripted", "script": [{"reply": "a", "when": {"inputContain": "x"}}]},
            ["provider.script[0].when.inputContain"],
        ),
        (
            {"type": "scripted", "script": [{"reply": "a", "when": {"afterToolResults": "yes"}}]},
            ["provider.script[0].when.afterToolResults"],
        ),
    ],
)
def test_the_llm_provider_is_checked(provider: object, bad_fields: list[str]) -> None:
    assert fields(errors_of(agent(llm_task(provider=provider)))) == [f"{T0}.{f}" for f in bad_fields]


@pytest.mark.parametrize("iterations", [1, 50])
def test_max_tool_iterations_between_1_and_50_is_accepted(iterations: int) -> None:
    assert errors_of(agent(llm_task(maxToolIterations=iterations))) == []


@pytest.mark.parametrize("iterations", [0, 51, "8", True, 2.5])
def test_max_tool_iterations_outside_1_to_50_is_refused(iterations: object) -> None:
    assert fields(errors_of(agent(llm_task(maxToolIterations=iterations)))) == [f"{T0}.maxToolIterations"]


def test_llm_tools_and_tool_approvals_must_be_objects() -> None:
    doc = agent(llm_task(tools=["http"], toolApprovals=["transfer_*"], systemMessage=3))
    assert fields(errors_of(doc)) == [f"{T0}.systemMessage", f"{T0}.tools", f"{T0}.toolApprovals"]


def test_llm_tool_approvals_content_is_checked_like_the_agents() -> None:
    """The rules themselves are tested in tests/toolgate/test_approval_config_validation.py."""
    doc = agent(llm_task(toolApprovals={"anything": ["goes"], "requireApproval": ["mpc:*"]}))
    assert fields(errors_of(doc)) == [
        f"{T0}.toolApprovals.anything",
        f"{T0}.toolApprovals.requireApproval[0]",
    ]


# --- warnings: near misses of reserved actions ---------------------------------------------------------


@pytest.mark.parametrize(
    "action", ["Pause_Conversation", "PAUSE_CONVERSATON", "pause_conversation", "PAUSE-CONVERSATION"]
)
def test_a_near_miss_of_pause_conversation_warns_that_it_will_not_pause(action: str) -> None:
    report = validate_agent_document(agent(rules_task(rule(actions=[action]))))
    assert report.ok
    assert report.warnings == [
        FieldError(
            f"{T0}.rules[0].actions[0]",
            f"'{action}' looks like the reserved action 'PAUSE_CONVERSATION' but is not it: it will not pause",
        )
    ]


def test_pause_conversation_itself_is_no_near_miss() -> None:
    report = validate_agent_document(agent(rules_task(rule(actions=["PAUSE_CONVERSATION"]))))
    assert report.warnings == []


def test_near_misses_are_found_wherever_actions_are_named() -> None:
    doc = agent(
        output({"action": "Stop_Conversation", "texts": ["bye"]}),
        properties({"name": "p", "value": 1, "actions": ["PAUSE_CONVERSATON"]}),
        http_task(http_call(actions=["conversation_end"])),
    )
    report = validate_agent_document(doc)
    assert report.ok
    assert fields(report.warnings) == [
        "workflows[0].tasks[0].outputs[0].action",
        "workflows[0].tasks[1].setProperties[0].actions[0]",
        "workflows[0].tasks[2].calls[0].actions[0]",
    ]
    assert report.warnings[0].message.endswith("it will not stop the conversation")


# --- warnings: a hitlConfig nothing can trigger -----------------------------------------------------------


UNTRIGGERED_CONFIG = {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT15M", "pauseReason": "Approve"}


def test_a_hitl_config_nothing_can_trigger_is_a_warning() -> None:
    report = validate_agent_document(
        agent(rules_task(rule(actions=["greet"])), hitlConfig=UNTRIGGERED_CONFIG)
    )
    assert report.ok
    assert fields(report.warnings) == ["hitlConfig"]
    assert "nothing can trigger a pause" in report.warnings[0].message
    assert "PAUSE_CONVERSATION" in report.warnings[0].message


def test_a_rule_emitting_pause_conversation_triggers_the_hitl_config() -> None:
    doc = agent(rules_task(rule(actions=["notify", "PAUSE_CONVERSATION"])), hitlConfig=UNTRIGGERED_CONFIG)
    assert validate_agent_document(doc).warnings == []


def test_agent_level_tool_approvals_trigger_the_hitl_config() -> None:
    config = UNTRIGGERED_CONFIG | {"toolApprovals": {"requireApproval": ["transfer_*"]}}
    assert validate_agent_document(agent(llm_task(), hitlConfig=config)).warnings == []


def test_llm_task_tool_approvals_trigger_the_hitl_config() -> None:
    doc = agent(llm_task(toolApprovals={"requireApproval": ["transfer_*"]}), hitlConfig=UNTRIGGERED_CONFIG)
    assert validate_agent_document(doc).warnings == []


def test_a_near_miss_does_not_count_as_a_pause_trigger() -> None:
    doc = agent(rules_task(rule(actions=["Pause_Conversation"])), hitlConfig={"pauseReason": "Approve"})
    assert fields(validate_agent_document(doc).warnings) == [f"{T0}.rules[0].actions[0]", "hitlConfig"]


def test_a_hitl_config_with_only_tool_approvals_gives_no_untriggered_warning() -> None:
    doc = agent(llm_task(), hitlConfig={"toolApprovals": {"requireApproval": ["x"]}})
    assert validate_agent_document(doc).warnings == []


# --- edit distance behind the near-miss lint ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("kitten", "sitting", 3),
        ("", "abc", 3),
        ("abc", "", 3),
        ("same", "same", 0),
        ("htp", "http", 1),
        ("mpc", "mcp", 2),
    ],
)
def test_levenshtein_counts_a_transposition_as_two_edits(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ("PAUSE_CONVERSATION", None),
        ("Pause_Conversation", "PAUSE_CONVERSATION"),
        ("PAUSE_CONVERSATON", "PAUSE_CONVERSATION"),
        ("PAUSE_CONVERSATIONS", "PAUSE_CONVERSATION"),
        ("PAUSE_CONVERSAT", None),
        ("STOP_CONVERSATON", "STOP_CONVERSATION"),
        ("pause", None),
        ("confirm_deletion", None),
    ],
)
def test_near_miss_finds_the_reserved_name_a_candidate_nearly_spells(
    candidate: str, expected: str | None
) -> None:
    assert near_miss(candidate, RESERVED_ACTIONS) == expected
