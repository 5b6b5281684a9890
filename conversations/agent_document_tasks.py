"""Save-time checks of each lifecycle task type of an agent document, and the JSON-shape checks they share.

Every check appends to a DocumentReport (``report.error`` / ``report.warn``) instead of raising, so one
save reports every problem of the document at once, each under its full field path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from approvals.edit_distance import near_miss
from conversations.pipeline.expressions import Expression, ExpressionSyntaxError, parse_expressions
from conversations.pipeline.memory import (
    CONVERSATION_END,
    CONVERSATION_START,
    PAUSE_CONVERSATION,
    RESERVED_ACTIONS,
    STOP_CONVERSATION,
)
from toolgate.approval_config import validate_tool_approvals
from toolgate.sources import BUILTIN_TOOL_NAMES, TOOLS_KEYS

if TYPE_CHECKING:
    from conversations.agent_document import DocumentReport

IDENTIFIER = re.compile(r"[A-Za-z0-9_.-]+")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
OCCURRENCES = ("currentStep", "lastStep", "anyStep", "never")
CONDITION_TYPES = (
    "inputmatcher",
    "actionmatcher",
    "propertymatcher",
    "contextmatcher",
    "negation",
    "connector",
)
CONTEXT_TYPES = ("string", "object", "expressions")
PROPERTY_SCOPES = ("conversation", "step")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
LLM_PROVIDERS = ("openai", "scripted")
SCRIPT_WHEN_KEYS = ("inputContains", "afterToolResults")
MAX_TOOL_ITERATIONS = 50
MAX_CONDITION_DEPTH = 16

_WHAT_RESERVED_ACTION_DOES = {
    PAUSE_CONVERSATION: "it will not pause",
    STOP_CONVERSATION: "it will not stop the conversation",
    CONVERSATION_START: "it will not run at the start of the conversation",
    CONVERSATION_END: "it will not end the conversation",
}


# --- JSON shapes -------------------------------------------------------------------------------------


def child(path: str, key: str | int) -> str:
    """``workflows`` + 0 -> ``workflows[0]``; ``workflows[0]`` + ``id`` -> ``workflows[0].id``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def expect_object(report: DocumentReport, value: object, path: str, *, required: bool = True) -> dict | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, dict):
        report.error(path, f"must be an object, got {json_type(value)}")
        return None
    return value


def expect_list(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, list):
        report.error(path, f"must be an array, got {json_type(value)}")
        return None
    if non_empty and not value:
        report.error(path, "must not be empty")
    return value


def expect_string(
    report: DocumentReport,
    value: object,
    path: str,
    *,
    required: bool = True,
    non_empty: bool = False,
    max_length: int | None = None,
    pattern: re.Pattern[str] | None = None,
) -> str | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, str):
        report.error(path, f"must be a string, got {json_type(value)}")
        return None
    if non_empty and not value.strip():
        report.error(path, "must not be empty")
        return None
    if max_length is not None and len(value) > max_length:
        report.error(path, f"exceeds the maximum length of {max_length} characters")
    elif pattern is not None and not pattern.fullmatch(value):
        report.error(path, f"'{value}' may only contain the characters {pattern.pattern}")
    return value


def expect_choice(
    report: DocumentReport,
    value: object,
    path: str,
    choices: tuple[str, ...],
    *,
    required: bool = True,
    ignore_case: bool = False,
) -> str | None:
    """The canonical spelling of ``value`` among ``choices``, or None (reported unless absent and optional)."""
    if value is None:
        if required:
            report.error(path, f"is required (one of {', '.join(choices)})")
        return None
    for choice in choices:
        if value == choice or (
            ignore_case and isinstance(value, str) and value.casefold() == choice.casefold()
        ):
            return choice
    shown = f"'{value}'" if isinstance(value, str) else json_type(value)
    report.error(path, f"{shown} must be one of {', '.join(choices)}")
    return None


def expect_boolean(report: DocumentReport, value: object, path: str) -> None:
    if value is not None and not isinstance(value, bool):
        report.error(path, f"must be true or false, got {json_type(value)}")


def expect_string_list(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list[str]:
    """The non-empty strings of a list of strings; every other entry is reported."""
    items = expect_list(report, value, path, required=required, non_empty=non_empty)
    names: list[str] = []
    for index, item in enumerate(items or []):
        name = expect_string(report, item, child(path, index), non_empty=True)
        if name is not None:
            names.append(name)
    return names


def expect_string_map(report: DocumentReport, value: object, path: str, *, repeatable: bool = False) -> None:
    """An object of string values (``repeatable``: a list of strings repeats the name, as in a query)."""
    mapping = expect_object(report, value, path, required=False)
    for key, item in (mapping or {}).items():
        if repeatable and isinstance(item, list):
            for index, repeated in enumerate(item):
                expect_string(report, repeated, child(child(path, key), index))
        elif not isinstance(item, str):
            report.error(child(path, key), f"must be a string, got {json_type(item)}")


def expect_expressions(
    report: DocumentReport, value: object, path: str, *, required: bool = True
) -> list[Expression] | None:
    text = expect_string(report, value, path, required=required, non_empty=required)
    if text is None:
        return None
    try:
        return parse_expressions(text)
    except ExpressionSyntaxError as exc:
        report.error(path, f"'{text}' is not a valid expression list: {exc}")
        return None


def warn_unknown_keys(
    report: DocumentReport, obj: dict, path: str, known: tuple[str, ...], what: str
) -> None:
    for key in obj:
        if key not in known:
            report.warn(child(path, key), f"'{key}' is not a {what} field and is ignored")


def lint_action_name(report: DocumentReport, name: str, path: str) -> None:
    """Warn when an action nearly spells a reserved action: it looks like a pause but never pauses."""
    reserved = near_miss(name, RESERVED_ACTIONS)
    if reserved is not None:
        report.warn(
            path,
            f"'{name}' looks like the reserved action '{reserved}' but is not it: "
            f"{_WHAT_RESERVED_ACTION_DOES.get(reserved, 'it will not act as that reserved action')}",
        )


def expect_action_names(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list[str]:
    names = expect_string_list(report, value, path, required=required, non_empty=non_empty)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                lint_action_name(report, item, child(path, index))
    return names


# --- secret references ---------------------------------------------------------------------------------

_REFERENCE_START = re.compile(r"\$\{(vault|env|caller):")
_SECRET_REFERENCE = re.compile(r"\$\{(?:vault|env):[A-Za-z0-9_.-]{1,128}\}")
_CALLER_TOKEN = "${caller:token}"


def check_secret_references(
    report: DocumentReport, value: object, path: str, *, header_value: Callable[[tuple], bool]
) -> None:
    """Every ``${vault:…}`` / ``${env:…}`` reference in ``value`` must be well-formed, and
    ``${caller:token}`` may appear only where ``header_value(keys)`` holds (a request header value):
    anywhere else it would leak the caller's token into a URL, body or log."""
    for keys, text in _strings(value, ()):
        for match in _REFERENCE_START.finditer(text):
            start = match.start()
            field = _path_of(path, keys)
            if match.group(1) == "caller":
                if not text.startswith(_CALLER_TOKEN, start):
                    report.error(
                        field,
                        f"unknown caller reference '{_snippet(text, start)}': only ${{caller:token}} exists",
                    )
                elif not header_value(keys):
                    report.error(field, "${caller:token} may only be used in request headers")
            elif not _SECRET_REFERENCE.match(text, start):
                kind = match.group(1)
                report.error(
                    field,
                    f"malformed secret reference '{_snippet(text, start)}': expected ${{{kind}:NAME}} with a NAME "
                    "of 1 to 128 characters from A-Z a-z 0-9 _ . -",
                )


def _strings(value: object, keys: tuple) -> Iterator[tuple[tuple, str]]:
    """Every string in ``value`` with its key path, in document order (iterative: no depth limit)."""
    stack: list[tuple[tuple, object]] = [(keys, value)]
    while stack:
        keys, value = stack.pop()
        if isinstance(value, str):
            yield keys, value
        elif isinstance(value, dict):
            stack.extend(((*keys, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*keys, index), item) for index, item in reversed(list(enumerate(value))))


def _path_of(path: str, keys: tuple) -> str:
    for key in keys:
        path = child(path, key)
    return path


def _snippet(text: str, start: int) -> str:
    end = text.find("}", start)
    end = len(text) if end < 0 else end + 1
    return text[start : min(end, start + 40)]


def is_request_header_value(keys: tuple) -> bool:
    """Inside an httpcalls task: ``calls[k].request.headers.<name>``."""
    return (
        len(keys) == 5
        and keys[0] == "calls"
        and isinstance(keys[1], int)
        and keys[2:4] == ("request", "headers")
        and isinstance(keys[4], str)
    )


# --- parser --------------------------------------------------------------------------------------------


def check_parser(report: DocumentReport, task: dict, path: str) -> None:
    entries = expect_list(report, task.get("dictionaries"), child(path, "dictionaries"))
    for index, entry in enumerate(entries or []):
        _check_dictionary_entry(report, entry, child(child(path, "dictionaries"), index))


def _check_dictionary_entry(report: DocumentReport, value: object, path: str) -> None:
    entry = expect_object(report, value, path)
    if entry is None:
        return
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
    rules = expect_list(report, task.get("rules"), child(path, "rules"))
    for index, value in enumerate(rules or []):
        rule_path = child(child(path, "rules"), index)
        rule = expect_object(report, value, rule_path)
        if rule is None:
            continue
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
    entries = expect_list(report, task.get("setProperties"), child(path, "setProperties"))
    for index, value in enumerate(entries or []):
        entry_path = child(child(path, "setProperties"), index)
        entry = expect_object(report, value, entry_path)
        if entry is None:
            continue
        expect_string(report, entry.get("name"), child(entry_path, "name"), non_empty=True)
        if "value" not in entry:
            report.error(child(entry_path, "value"), "is required (any JSON value, null included)")
        expect_choice(report, entry.get("scope"), child(entry_path, "scope"), PROPERTY_SCOPES, required=False)
        expect_action_names(report, entry.get("actions"), child(entry_path, "actions"), required=False)


def check_output(report: DocumentReport, task: dict, path: str) -> None:
    outputs = expect_list(report, task.get("outputs"), child(path, "outputs"))
    for index, value in enumerate(outputs or []):
        output_path = child(child(path, "outputs"), index)
        output = expect_object(report, value, output_path)
        if output is None:
            continue
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
    _check_target_url(report, task.get("targetServerUrl"), child(path, "targetServerUrl"))
    openapi = expect_object(report, task.get("openapi"), child(path, "openapi"), required=False)
    calls_path = child(path, "calls")
    if task.get("calls") is None and openapi is None:
        report.error(calls_path, "is required (or an 'openapi' document to generate the calls from)")
    calls = expect_list(report, task.get("calls"), calls_path, required=False)
    seen: dict[str, str] = {}
    for index, value in enumerate(calls or []):
        call_path = child(calls_path, index)
        call = expect_object(report, value, call_path)
        if call is None:
            continue
        name = expect_string(
            report, call.get("name"), child(call_path, "name"), non_empty=True, pattern=IDENTIFIER
        )
        if name is not None:
            if name in seen:
                report.error(child(call_path, "name"), f"duplicate call name '{name}' (also {seen[name]})")
            else:
                seen[name] = child(call_path, "name")
        _check_call(report, call, call_path)


def _check_target_url(report: DocumentReport, value: object, path: str) -> None:
    url = expect_string(report, value, path, non_empty=True)
    if url is None or url.startswith("${"):
        return  # the whole base URL comes from a secret; its syntax is checked with the other references
    parts = urlsplit(_SECRET_REFERENCE.sub("reference", url))
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        report.error(path, f"'{url}' must be an http(s) URL such as https://api.example.com")


def _check_call(report: DocumentReport, call: dict, path: str) -> None:
    expect_string(report, call.get("description"), child(path, "description"), required=False)
    expect_action_names(report, call.get("actions"), child(path, "actions"), required=False)
    expect_object(report, call.get("parameters"), child(path, "parameters"), required=False)
    expect_object(report, call.get("preRequest"), child(path, "preRequest"), required=False)
    expect_object(report, call.get("postResponse"), child(path, "postResponse"), required=False)
    expect_boolean(report, call.get("fireAndForget"), child(path, "fireAndForget"))
    request_path = child(path, "request")
    request = expect_object(report, call.get("request"), request_path)
    if request is None:
        return
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


def check_llm(report: DocumentReport, task: dict, path: str) -> None:
    """The llm task; its ``toolApprovals`` block is checked like the agent's (toolgate.approval_config)."""
    _check_provider(report, task.get("provider"), child(path, "provider"))
    expect_string(report, task.get("systemMessage"), child(path, "systemMessage"), required=False)
    _check_tools(report, task.get("tools"), child(path, "tools"))
    approvals_path = child(path, "toolApprovals")
    approvals = expect_object(report, task.get("toolApprovals"), approvals_path, required=False)
    if approvals is not None:
        report.errors.extend(validate_tool_approvals(approvals, approvals_path))
    history = task.get("conversationHistoryLimit")
    if history is not None and (isinstance(history, bool) or not isinstance(history, int) or not 0 <= history <= 100):
        report.error(child(path, "conversationHistoryLimit"), f"must be an integer between 0 and 100, got {history!r}")
    iterations = task.get("maxToolIterations")
    if iterations is not None and (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not 1 <= iterations <= MAX_TOOL_ITERATIONS
    ):
        report.error(
            child(path, "maxToolIterations"),
            f"must be an integer between 1 and {MAX_TOOL_ITERATIONS}, got {iterations!r}",
        )


def _check_tools(report: DocumentReport, value: object, path: str) -> None:
    """The shape of the ``tools`` object; that ``http`` names httpcalls tasks is checked per document
    (``check_llm_tool_references``)."""
    tools = expect_object(report, value, path, required=False)
    if tools is None:
        return
    for key in tools:
        if key not in TOOLS_KEYS:
            hint = near_miss(key, TOOLS_KEYS)
            report.error(
                child(path, key),
                f"'{key}' is not a tool source"
                + (f" — did you mean '{hint}'?" if hint else "")
                + f" (known: {', '.join(TOOLS_KEYS)})",
            )
    builtin_path = child(path, "builtin")
    for index, value in enumerate(
        expect_list(report, tools.get("builtin"), builtin_path, required=False) or []
    ):
        name = expect_string(report, value, child(builtin_path, index), non_empty=True)
        if name is not None and name not in BUILTIN_TOOL_NAMES:
            report.error(
                child(builtin_path, index),
                f"unknown builtin tool '{name}' (known: {', '.join(BUILTIN_TOOL_NAMES)})",
            )
    expect_string_list(report, tools.get("http"), child(path, "http"), required=False)
    mcp_path = child(path, "mcp")
    for index, value in enumerate(expect_list(report, tools.get("mcp"), mcp_path, required=False) or []):
        server = expect_object(report, value, child(mcp_path, index))
        if server is not None:
            expect_string(report, server.get("name"), child(child(mcp_path, index), "name"), non_empty=True)
            _check_target_url(report, server.get("url"), child(child(mcp_path, index), "url"))
    a2a_path = child(path, "a2a")
    for index, value in enumerate(expect_list(report, tools.get("a2a"), a2a_path, required=False) or []):
        target_path = child(a2a_path, index)
        target = expect_object(report, value, target_path)
        if target is not None:
            expect_string(
                report, target.get("name"), child(target_path, "name"), non_empty=True, pattern=TOOL_NAME
            )
            expect_string(report, target.get("agentId"), child(target_path, "agentId"), non_empty=True)
            expect_string(
                report, target.get("description"), child(target_path, "description"), required=False
            )
    for flag in ("dynamic", "memory", "recall"):
        expect_boolean(report, tools.get(flag), child(path, flag))


def check_llm_tool_references(report: DocumentReport, doc: dict) -> None:
    """Every ``tools.http`` entry of an llm task names an httpcalls task of the same document; one that
    offers no tool (no call declares ``parameters`` and it has no ``openapi``) is warned about."""
    workflows = doc.get("workflows") if isinstance(doc.get("workflows"), list) else []
    located = [
        (child(child(child("workflows", w_index), "tasks"), t_index), task)
        for w_index, workflow in enumerate(workflows)
        if isinstance(workflow, dict) and isinstance(workflow.get("tasks"), list)
        for t_index, task in enumerate(workflow["tasks"])
        if isinstance(task, dict)
    ]
    httpcalls = {
        task["id"]: task
        for _, task in located
        if task.get("type") == "httpcalls" and isinstance(task.get("id"), str)
    }
    for path, task in located:
        tools = task.get("tools")
        if (
            task.get("type") != "llm"
            or not isinstance(tools, dict)
            or not isinstance(tools.get("http"), list)
        ):
            continue
        for index, task_id in enumerate(tools["http"]):
            if not isinstance(task_id, str):
                continue
            entry_path = child(child(child(path, "tools"), "http"), index)
            target = httpcalls.get(task_id)
            if target is None:
                hint = near_miss(task_id, httpcalls)
                report.error(
                    entry_path,
                    f"'{task_id}' is not the id of an httpcalls task of this agent"
                    + (f" — did you mean '{hint}'?" if hint else "")
                    + f" (httpcalls tasks: {', '.join(httpcalls) or 'none'})",
                )
            elif not target.get("openapi") and not any(
                isinstance(call, dict) and isinstance(call.get("parameters"), dict)
                for call in target.get("calls") or []
            ):
                report.warn(
                    entry_path,
                    f"httpcalls task '{task_id}' offers no tool: none of its calls declares 'parameters'",
                )


def _check_provider(report: DocumentReport, value: object, path: str) -> None:
    provider = expect_object(report, value, path)
    if provider is None:
        return
    kind = expect_choice(report, provider.get("type"), child(path, "type"), LLM_PROVIDERS)
    if kind == "openai":
        expect_string(report, provider.get("model"), child(path, "model"), non_empty=True)
        expect_string(report, provider.get("baseUrl"), child(path, "baseUrl"), required=False)
        api_key = expect_string(report, provider.get("apiKey"), child(path, "apiKey"), required=False)
        if isinstance(api_key, str) and api_key and not api_key.strip().startswith("${"):
            report.warn(child(path, "apiKey"), "a literal API key is stored in the agent document: use a "
                        "${vault:NAME} or ${env:NAME} reference instead (documents are readable by their users)")
    elif kind == "scripted":
        script = expect_list(report, provider.get("script"), child(path, "script"))
        for index, entry in enumerate(script or []):
            _check_script_entry(report, entry, child(child(path, "script"), index))


def _check_script_entry(report: DocumentReport, value: object, path: str) -> None:
    entry = expect_object(report, value, path)
    if entry is None:
        return
    has_reply, has_calls = entry.get("reply") is not None, entry.get("toolCalls") is not None
    if has_reply == has_calls:
        report.error(path, "needs exactly one of 'reply' or 'toolCalls'")
    expect_string(report, entry.get("reply"), child(path, "reply"), required=False)
    calls = expect_list(report, entry.get("toolCalls"), child(path, "toolCalls"), required=False)
    for index, value in enumerate(calls or []):
        call_path = child(child(path, "toolCalls"), index)
        call = expect_object(report, value, call_path)
        if call is not None:
            expect_string(report, call.get("id"), child(call_path, "id"), required=False)
            expect_string(report, call.get("name"), child(call_path, "name"), non_empty=True)
            expect_object(report, call.get("arguments"), child(call_path, "arguments"), required=False)
    when = expect_object(report, entry.get("when"), child(path, "when"), required=False)
    if when is not None:
        for key in when:
            if key not in SCRIPT_WHEN_KEYS:
                # a misspelt condition would make the entry answer every call
                report.error(
                    child(child(path, "when"), key), f"'{key}' must be one of {', '.join(SCRIPT_WHEN_KEYS)}"
                )
        expect_string(
            report, when.get("inputContains"), child(child(path, "when"), "inputContains"), required=False
        )
        expect_boolean(report, when.get("afterToolResults"), child(child(path, "when"), "afterToolResults"))


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
    "llm": ("provider", "systemMessage", "tools", "toolApprovals", "maxToolIterations",
            "conversationHistoryLimit"),
}
