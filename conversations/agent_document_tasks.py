"""Save-time checks of each lifecycle task type of an agent document (the llm task's are in
agent_document_llm, the shared field checks in document_fields).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from conversations.agent_document_llm import check_llm
from conversations.document_fields import (
    CONDITION_TYPES,
    CONTEXT_TYPES,
    HTTP_METHODS,
    IDENTIFIER,
    MAX_CONDITION_DEPTH,
    OCCURRENCES,
    PROPERTY_SCOPES,
    check_target_url,
    child,
    expect_action_names,
    expect_boolean,
    expect_choice,
    expect_expressions,
    expect_list,
    expect_object,
    expect_objects,
    expect_string,
    expect_string_list,
    expect_string_map,
    expect_unique,
    json_type,
    lint_action_name,
    warn_unknown_keys,
)
from conversations.pipeline.expressions import Expression
from conversations.pipeline.memory import RESERVED_ACTIONS
from toolgate.http_call_config import read_call_processing

if TYPE_CHECKING:
    from conversations.agent_document import DocumentReport


# --- parser --------------------------------------------------------------------------------------------


def check_parser(report: DocumentReport, task: dict, path: str) -> None:
    for entry, entry_path in expect_objects(report, task.get("dictionaries"), child(path, "dictionaries")):
        _check_dictionary_entry(report, entry, entry_path)


def _check_dictionary_entry(report: DocumentReport, entry: dict, path: str) -> None:
    kinds = [kind for kind in ("word", "phrase", "regex") if entry.get(kind) is not None]
    if not kinds:
        report.error(path, "needs one of 'word', 'phrase' or 'regex'")
    elif len(kinds) > 1:
        report.error(
            path, f"has both '{kinds[0]}' and '{kinds[1]}': an entry is exactly one of word, phrase or regex"
        )
    word = expect_string(report, entry.get("word"), child(path, "word"), required=False, non_empty=True)
    if word is not None and any(char.isspace() for char in word):
        report.error(child(path, "word"), f"'{word}' contains whitespace: use a 'phrase' for several words")
    expect_string(report, entry.get("phrase"), child(path, "phrase"), required=False, non_empty=True)
    regex = expect_string(report, entry.get("regex"), child(path, "regex"), required=False, non_empty=True)
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            report.error(child(path, "regex"), f"'{regex}' is not a valid regular expression: {exc}")
    expect_expressions(report, entry.get("expressions"), child(path, "expressions"))


# --- behavior rules ------------------------------------------------------------------------------------


def check_behavior_rules(report: DocumentReport, task: dict, path: str) -> None:
    for rule, rule_path in expect_objects(report, task.get("rules"), child(path, "rules")):
        expect_string(report, rule.get("name"), child(rule_path, "name"))
        expect_action_names(report, rule.get("actions"), child(rule_path, "actions"), non_empty=True)
        _check_conditions(
            report, rule.get("conditions"), child(rule_path, "conditions"), nested=False, depth=0
        )


def _check_conditions(report: DocumentReport, value: object, path: str, *, nested: bool, depth: int) -> None:
    """A rule's conditions may be empty or absent (the rule always fires); a negation's or connector's may not."""
    conditions = expect_list(report, value, path, required=nested, non_empty=nested)
    for index, condition in enumerate(conditions or []):
        _check_condition(report, condition, child(path, index), depth)


def _check_condition(report: DocumentReport, value: object, path: str, depth: int) -> None:
    condition = expect_object(report, value, path)
    if condition is None:
        return
    kind = expect_choice(
        report, condition.get("type"), child(path, "type"), CONDITION_TYPES, ignore_case=True
    )
    if kind is None:
        return
    configs_path = child(path, "configs")
    nests = kind in ("negation", "connector")
    configs = expect_object(report, condition.get("configs"), configs_path, required=not nests)
    if nests:
        if kind == "connector" and configs is not None:
            # no operator means AND, as at run time
            expect_choice(
                report,
                configs.get("operator"),
                child(configs_path, "operator"),
                ("AND", "OR"),
                required=False,
                ignore_case=True,
            )
        if depth + 1 >= MAX_CONDITION_DEPTH:
            report.error(path, f"conditions are nested more than {MAX_CONDITION_DEPTH} levels deep")
            return
        # nested conditions sit beside the type; the runner also reads them from configs
        if "conditions" not in condition and configs is not None and "conditions" in configs:
            nested, nested_path = configs["conditions"], child(configs_path, "conditions")
        else:
            nested, nested_path = condition.get("conditions"), child(path, "conditions")
        _check_conditions(report, nested, nested_path, nested=True, depth=depth + 1)
    elif configs is not None:
        _CONDITION_CONFIGS[kind](report, configs, configs_path)


def _input_matcher(report: DocumentReport, configs: dict, path: str) -> None:
    expect_expressions(report, configs.get("expressions"), child(path, "expressions"))
    _expect_occurrence(report, configs, path)


def _action_matcher(report: DocumentReport, configs: dict, path: str) -> None:
    actions = configs.get("actions")
    if isinstance(actions, str):
        if not [name for name in actions.split(",") if name.strip()]:
            report.error(child(path, "actions"), "must name at least one action")
    else:
        expect_string_list(report, actions, child(path, "actions"), non_empty=True)
    _expect_occurrence(report, configs, path)


def _expect_occurrence(report: DocumentReport, configs: dict, path: str) -> None:
    expect_choice(
        report,
        configs.get("occurrence"),
        child(path, "occurrence"),
        OCCURRENCES,
        required=False,
        ignore_case=True,
    )


def _expect_present(report: DocumentReport, configs: dict, key: str, path: str) -> None:
    """Compared values may be any JSON (compared as text at run time), but must be stated."""
    if key not in configs:
        report.error(child(path, key), "is required")


def _property_matcher(report: DocumentReport, configs: dict, path: str) -> None:
    """Without ``value`` the condition holds when the property is set at all."""
    expect_string(report, configs.get("name"), child(path, "name"), non_empty=True)


def _context_matcher(report: DocumentReport, configs: dict, path: str) -> None:
    expect_string(report, configs.get("contextKey"), child(path, "contextKey"), non_empty=True)
    context_type = expect_choice(
        report,
        configs.get("contextType"),
        child(path, "contextType"),
        CONTEXT_TYPES,
        required=False,
        ignore_case=True,
    )
    if configs.get("contextType") is None:
        context_type = "string"
    if context_type == "string":
        _expect_present(report, configs, "contextValue", path)
    elif context_type == "object":
        expect_string(report, configs.get("objectKeyPath"), child(path, "objectKeyPath"), non_empty=True)
        _expect_present(report, configs, "objectValue", path)
    elif context_type == "expressions":
        expect_expressions(report, configs.get("expressions"), child(path, "expressions"))


_CONDITION_CONFIGS: dict[str, Callable[[DocumentReport, dict, str], None]] = {
    "inputmatcher": _input_matcher,
    "actionmatcher": _action_matcher,
    "propertymatcher": _property_matcher,
    "contextmatcher": _context_matcher,
}


# --- properties, output, templating ---------------------------------------------------------------------


def check_properties(report: DocumentReport, task: dict, path: str) -> None:
    for entry, entry_path in expect_objects(report, task.get("setProperties"), child(path, "setProperties")):
        expect_string(report, entry.get("name"), child(entry_path, "name"), non_empty=True)
        if "value" not in entry:
            report.error(child(entry_path, "value"), "is required (any JSON value, null included)")
        expect_choice(report, entry.get("scope"), child(entry_path, "scope"), PROPERTY_SCOPES, required=False)
        expect_action_names(report, entry.get("actions"), child(entry_path, "actions"), required=False)


def check_output(report: DocumentReport, task: dict, path: str) -> None:
    for output, output_path in expect_objects(report, task.get("outputs"), child(path, "outputs")):
        action = expect_string(report, output.get("action"), child(output_path, "action"), non_empty=True)
        if action is not None:
            lint_action_name(report, action, child(output_path, "action"))
        texts = expect_list(report, output.get("texts"), child(output_path, "texts"), non_empty=True)
        for text_index, text in enumerate(texts or []):
            expect_string(report, text, child(child(output_path, "texts"), text_index))
        replies = expect_list(
            report, output.get("quickReplies"), child(output_path, "quickReplies"), required=False
        )
        for reply_index, reply in enumerate(replies or []):
            _check_quick_reply(report, reply, child(child(output_path, "quickReplies"), reply_index))


def _check_quick_reply(report: DocumentReport, value: object, path: str) -> None:
    """A quick reply whose expression is a reserved action would let a click inject that action
    (``PAUSE_CONVERSATION``, ``STOP_CONVERSATION``…) into the conversation: refused."""
    reply = expect_object(report, value, path)
    if reply is None:
        return
    expect_string(report, reply.get("value"), child(path, "value"))
    expressions = expect_expressions(
        report, reply.get("expressions"), child(path, "expressions"), required=False
    )
    reserved = {name.casefold(): name for name in RESERVED_ACTIONS}
    for name in _expression_names(expressions or []):
        if name.casefold() in reserved:
            report.error(
                child(path, "expressions"),
                f"'{name}' is the reserved action {reserved[name.casefold()]} and cannot be a quick-reply expression",
            )


def _expression_names(expressions: list[Expression]) -> Iterator[str]:
    for expression in expressions:
        yield expression.name
        yield from _expression_names(list(expression.args))


def check_templating(report: DocumentReport, task: dict, path: str) -> None:
    """Templating has no required configuration."""


# --- httpcalls -----------------------------------------------------------------------------------------


def check_httpcalls(report: DocumentReport, task: dict, path: str) -> None:
    check_target_url(report, task.get("targetServerUrl"), child(path, "targetServerUrl"))
    openapi = expect_object(report, task.get("openapi"), child(path, "openapi"), required=False)
    calls_path = child(path, "calls")
    if task.get("calls") is None and openapi is None:
        report.error(calls_path, "is required (or an 'openapi' document to generate the calls from)")
    seen: dict[str, str] = {}
    for call, call_path in expect_objects(report, task.get("calls"), calls_path, required=False):
        name = expect_string(
            report, call.get("name"), child(call_path, "name"), non_empty=True, pattern=IDENTIFIER
        )
        expect_unique(report, name, child(call_path, "name"), seen, "call name")
        _check_call(report, call, call_path)


CALL_KEYS = (
    "name",
    "description",
    "actions",
    "parameters",
    "request",
    "preRequest",
    "postResponse",
    "fireAndForget",
)
REQUEST_KEYS = ("method", "path", "headers", "queryParams", "body")
# Fields of EDDI's ApiCall/Request that do nothing here: refused, because a user relying on one
# would otherwise get a call that silently behaves differently (unknown keys are warned about instead).
_REFERENCE_ONLY_KEYS = {
    "saveResponse": "is not needed: the response is always stored under memory.current.<call name>",
    "responseObjectName": "is not supported: the response is stored under memory.current.<call name>",
    "responseHeaderObjectName": "is not supported: response headers are not stored",
    "isBatchCalls": "is not supported: batch calls do not run here",
    "iterationObjectName": "is not supported: batch calls do not run here",
    "timeoutInMillis": "is not supported: every call uses HITL_HTTP_TIMEOUT_SECONDS",
    "maxResponseSizeInBytes": "is not supported",
}
_REFERENCE_ONLY_REQUEST_KEYS = {"contentType": "is not supported: set a Content-Type header"}


def _check_keys(
    report: DocumentReport, obj: dict, path: str, known: tuple[str, ...], refused: dict[str, str], what: str
) -> None:
    for key in obj:
        if key in refused:
            report.error(child(path, key), f"'{key}' {refused[key]}")
    warn_unknown_keys(report, {key: None for key in obj if key not in refused}, path, known, what)


def _check_call(report: DocumentReport, call: dict, path: str) -> None:
    _check_keys(report, call, path, CALL_KEYS, _REFERENCE_ONLY_KEYS, "call")
    expect_string(report, call.get("description"), child(path, "description"), required=False)
    expect_action_names(report, call.get("actions"), child(path, "actions"), required=False)
    expect_object(report, call.get("parameters"), child(path, "parameters"), required=False)
    expect_boolean(report, call.get("fireAndForget"), child(path, "fireAndForget"))
    # declared features run or are refused: the runner reads these fields with the same function
    report.errors.extend(read_call_processing(call, path)[1])
    request_path = child(path, "request")
    request = expect_object(report, call.get("request"), request_path)
    if request is None:
        return
    _check_keys(report, request, request_path, REQUEST_KEYS, _REFERENCE_ONLY_REQUEST_KEYS, "request")
    method = request.get("method")
    if method is not None and (not isinstance(method, str) or method.upper() not in HTTP_METHODS):
        shown = f"'{method}'" if isinstance(method, str) else json_type(method)
        report.error(child(request_path, "method"), f"{shown} must be one of {', '.join(HTTP_METHODS)}")
    expect_string(report, request.get("path"), child(request_path, "path"), required=False)
    expect_string_map(report, request.get("headers"), child(request_path, "headers"))
    expect_string_map(report, request.get("queryParams"), child(request_path, "queryParams"), repeatable=True)
    body = request.get("body")
    if body is not None and not isinstance(body, str | dict | list):
        report.error(
            child(request_path, "body"),
            f"must be a string, an object, an array or null, got {json_type(body)}",
        )


# --- llm -----------------------------------------------------------------------------------------------


TaskCheck = Callable[["DocumentReport", dict[str, Any], str], None]

TASK_CHECKS: dict[str, TaskCheck] = {
    "parser": check_parser,
    "behavior_rules": check_behavior_rules,
    "properties": check_properties,
    "output": check_output,
    "templating": check_templating,
    "httpcalls": check_httpcalls,
    "llm": check_llm,
}

TASK_KEYS: dict[str, tuple[str, ...]] = {
    "parser": ("dictionaries",),
    "behavior_rules": ("rules",),
    "properties": ("setProperties",),
    "output": ("outputs",),
    "templating": (),
    "httpcalls": ("targetServerUrl", "calls", "openapi"),
    "llm": (
        "provider",
        "systemMessage",
        "tools",
        "toolApprovals",
        "maxToolIterations",
        "conversationHistoryLimit",
    ),
}
