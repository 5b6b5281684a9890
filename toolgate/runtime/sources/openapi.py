"""Calls generated from an OpenAPI 3 document (``"openapi": {…}`` on an ``httpcalls`` task).

Every operation with an ``operationId`` becomes a call of that name (operations without one are
skipped). Its ``parameters`` schema has one property per path and query parameter (path parameters
always required, query parameters when the document says so) plus ``body`` for a JSON request body
(``requestBody`` when a parameter is already called ``body``). Local ``$ref``s are inlined (to a
bounded depth; deeper or external references become an unconstrained schema). The request is
``{method, path: /pets/{args.petId}, queryParams: {limit: "{args.limit}"}, body: "{args.body}"}`` and
goes through the same builder as declared calls; per invocation, query parameters and the body the
model left out are dropped (an array argument repeats its query parameter). The target is the task's
``targetServerUrl``, else the document's first ``servers[].url``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPERATION_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
MAX_REF_DEPTH = 12
_PATH_PARAMETER = re.compile(r"\{([^{}]+)\}")
_JSON_MEDIA = re.compile(r"^application/(?:[\w.+-]+\+)?json\b")

CallShaper = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class GeneratedCall:
    call: dict[str, Any]
    # adapts the call to one invocation's arguments (drops what the model left out)
    shape: CallShaper
    # "get:/pets/{petId}": the method and the document's own path
    endpoint: str


def openapi_target(task: dict[str, Any]) -> dict[str, Any]:
    """``task`` with ``targetServerUrl`` taken from the document's first server when it has none."""
    document = task.get("openapi")
    if task.get("targetServerUrl") or not isinstance(document, dict):
        return task
    servers = document.get("servers") or []
    url = servers[0].get("url") if servers and isinstance(servers[0], dict) else None
    return {**task, "targetServerUrl": url} if url else task


def openapi_calls(task: dict[str, Any]) -> list[GeneratedCall]:
    """The generated call of every operation of ``task["openapi"]`` that has an operationId."""
    document = task.get("openapi")
    if not isinstance(document, dict):
        return []
    calls = []
    for path, item in (document.get("paths") or {}).items():
        item = _inline(document, item)
        if not isinstance(item, dict):
            continue
        for method in OPERATION_METHODS:
            operation = item.get(method)
            if isinstance(operation, dict) and operation.get("operationId"):
                calls.append(_operation_call(document, str(path), method, operation, item.get("parameters")))
    return calls


def _path_and_query_parameters(
    document: dict[str, Any], operation: dict[str, Any], shared: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """The operation's path and query parameters (the path item's shared ones first), by (name, in)."""
    parameters: dict[tuple[str, str], dict[str, Any]] = {}
    for parameter in [*(shared or []), *(operation.get("parameters") or [])]:
        parameter = _inline(document, parameter)
        if isinstance(parameter, dict) and parameter.get("in") in ("path", "query") and parameter.get("name"):
            parameters[(str(parameter["name"]), parameter["in"])] = parameter
    return parameters


def _arguments_schema(
    parameters: dict[tuple[str, str], dict[str, Any]],
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The tool's argument properties, the required ones and the query parameters' names."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    query_names: list[str] = []
    for (name, location), parameter in parameters.items():
        schema = dict(parameter.get("schema") or {})
        if parameter.get("description") and "description" not in schema:
            schema["description"] = parameter["description"]
        properties[name] = schema
        if location == "path" or parameter.get("required"):
            required.append(name)
        if location == "query":
            query_names.append(name)
    return properties, required, query_names


def _operation_call(
    document: dict[str, Any], path: str, method: str, operation: dict[str, Any], shared: Any
) -> GeneratedCall:
    properties, required, query_names = _arguments_schema(
        _path_and_query_parameters(document, operation, shared)
    )
    request: dict[str, Any] = {
        "method": method.upper(),
        "path": _PATH_PARAMETER.sub(lambda match: "{args." + match.group(1) + "}", path),
    }
    if query_names:
        request["queryParams"] = {name: "{args." + name + "}" for name in query_names}
    body_name, body = _json_body(document, operation.get("requestBody"), properties)
    if body is not None:
        properties[body_name] = body["schema"]
        if body["required"]:
            required.append(body_name)
        request["body"] = "{args." + body_name + "}"
    call = {
        "name": str(operation["operationId"]),
        "description": str(
            operation.get("summary") or operation.get("description") or f"{method.upper()} {path}"
        ),
        "parameters": {"type": "object", "properties": properties, "required": required},
        "request": request,
    }

    def shape(args: dict[str, Any]) -> dict[str, Any]:
        shaped = copy.deepcopy(call)
        shaped_request = shaped["request"]
        query = {}
        for name in query_names:
            value = args.get(name)
            if isinstance(value, list):
                query[name] = ["{args." + name + "." + str(index) + "}" for index in range(len(value))]
            elif value is not None:
                query[name] = "{args." + name + "}"
        shaped_request.pop("queryParams", None)
        if query:
            shaped_request["queryParams"] = query
        if body is not None and args.get(body_name) is None:
            shaped_request.pop("body", None)
        return shaped

    return GeneratedCall(call, shape, f"{method}:{path if path.startswith('/') else '/' + path}")


def _json_body(
    document: dict[str, Any], request_body: Any, properties: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    name = "body" if "body" not in properties else "requestBody"
    request_body = _inline(document, request_body)
    if not isinstance(request_body, dict):
        return name, None
    for media_type, content in (request_body.get("content") or {}).items():
        if _JSON_MEDIA.match(str(media_type)) and isinstance(content, dict):
            return name, {
                "schema": content.get("schema") or {},
                "required": bool(request_body.get("required")),
            }
    return name, None


def _inline(document: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """``node`` with every local ``$ref`` replaced by its target (bounded depth, see module docstring)."""
    if isinstance(node, list):
        return [_inline(document, item, depth) for item in node]
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str):
        target = _pointer(document, reference) if depth < MAX_REF_DEPTH else None
        return {} if target is None else _inline(document, target, depth + 1)
    return {key: _inline(document, value, depth) for key, value in node.items()}


def _pointer(document: dict[str, Any], reference: str) -> Any:
    if not reference.startswith("#/"):
        return None
    current: Any = document
    for part in reference[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current
