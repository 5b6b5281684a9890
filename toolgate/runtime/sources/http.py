"""Http tools (source ``http``): the calls of an ``httpcalls`` task offered to the model.

Every call that declares ``parameters`` (the JSON schema of the model's arguments) becomes a tool named
after the call. Its endpoint is ``<method lower-case>:<path as declared>`` (``post:/accounts/{args.id}``)
for patterns such as ``http.post:/accounts/*``. The request is built by ``toolgate.outbound.http_requests``, the
one builder, with the template data of the turn plus ``args`` (the model's arguments): ``run`` goes
through ``toolgate.outbound.http_calls.run_http_call``, as a rule-fired call does (``preRequest``, the attempts,
``postResponse``; property writes through ``ToolContext.set_property``; every attempt's request is checked
by the self-conversation guard and by ``ToolContext.check_request`` before it is sent) and returns ``{"status": <http status>, "body": <parsed
body>}`` (a ``fireAndForget`` call returns ``{"sent": true, "status": <int or null>}``; a call that cannot
be built or sent returns ``{"error"}``), and ``resolve`` builds the request of the first attempt without
sending it and without running ``preRequest.propertyInstructions``, for request pinning.

A call can never be pinned (``unpinnable_reason``) when its request is not fixed at approval time:
``preRequest.propertyInstructions`` present (even empty), ``fireAndForget`` with
``preRequest.batchRequests``, or ``postResponse.retryApiCallInstruction`` with ``maxRetries`` ≥ 1
(default 3).

``openapi_tools`` offers the operations of an OpenAPI 3 document (``task["openapi"]``) the same way:
their calls are generated (``toolgate.runtime.sources.openapi``) and built by the same builder; their endpoint
is the document's path (``delete:/pets/{petId}``).
"""

from __future__ import annotations

from typing import Any

from toolgate.gate.tools import Tool, ToolContext
from toolgate.outbound.http_call_config import DEFAULT_MAX_RETRIES
from toolgate.outbound.http_calls import CallEffects, run_http_call
from toolgate.outbound.http_requests import BuiltRequest, build_request
from toolgate.runtime.execution import SELF_CONVERSATION, targets_conversation
from toolgate.runtime.sources.openapi import CallShaper, openapi_calls, openapi_target


def http_tools(httpcalls_task: dict[str, Any]) -> list[Tool]:
    """One tool per call of ``httpcalls_task`` that declares ``parameters``, in document order."""
    return [
        http_tool(httpcalls_task, call)
        for call in httpcalls_task.get("calls") or []
        if isinstance(call, dict) and call.get("name") and isinstance(call.get("parameters"), dict)
    ]


def openapi_tools(task: dict[str, Any]) -> list[Tool]:
    """One tool per operation of ``task["openapi"]`` that has an ``operationId`` (see sources.openapi)."""
    target = openapi_target(task)
    return [
        http_tool(target, generated.call, shape=generated.shape, endpoint=generated.endpoint)
        for generated in openapi_calls(task)
    ]


def http_tool(
    task: dict[str, Any],
    call: dict[str, Any],
    *,
    shape: CallShaper | None = None,
    endpoint: str | None = None,
) -> Tool:
    """The tool of ``call``. OpenAPI tools pass ``shape`` (adapts the call to the arguments before it is
    built) and ``endpoint`` (the document's path rather than the generated template)."""
    request = call.get("request") or {}

    # run and resolve shape the call the same way, so a re-resolved request matches the approved one
    def call_for(args: dict[str, Any]) -> dict[str, Any]:
        return shape(args) if shape is not None else call

    def resolve(args: dict[str, Any], ctx: ToolContext) -> BuiltRequest:
        data = {**ctx.template_data, "args": args}
        return build_request(task, call_for(args), data, caller_token=ctx.caller_token or None)

    def run(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        def checked(built: BuiltRequest) -> dict[str, Any] | None:
            if targets_conversation(built, ctx.conversation_id):
                return dict(SELF_CONVERSATION)
            return ctx.check_request(built) if ctx.check_request is not None else None

        # the result never carries a resolved secret back (to the model, the journal or memory)
        return run_http_call(
            task,
            call_for(args),
            {**ctx.template_data, "args": args},
            caller_token=ctx.caller_token or None,
            effects=CallEffects(set_property=ctx.set_property, check_attempt=checked),
        )

    method = str(request.get("method") or "GET").strip()
    return Tool(
        name=str(call["name"]),
        source="http",
        description=str(call.get("description") or f"{method.upper()} {request.get('path') or '/'}"),
        parameters=call.get("parameters") or {"type": "object", "properties": {}},
        run=run,
        endpoint=endpoint or endpoint_of(method, request.get("path")),
        resolve=resolve,
        unpinnable_reason=unpinnable_reason(call),
    )


def endpoint_of(method: str, path: Any) -> str:
    """``post:/accounts/{args.id}``: the method lower-cased, the path as declared with a leading slash."""
    text = str(path or "").strip()
    return f"{method.strip().lower()}:{text if text.startswith('/') else '/' + text}"


def unpinnable_reason(call: dict[str, Any]) -> str | None:
    """Why the request of ``call`` cannot be fixed when it is approved (module rules), else None."""
    pre = call.get("preRequest") if isinstance(call.get("preRequest"), dict) else {}
    post = call.get("postResponse") if isinstance(call.get("postResponse"), dict) else {}
    if pre.get("propertyInstructions") is not None:
        return "preRequest.propertyInstructions change the conversation before the request is built"
    if call.get("fireAndForget") and pre.get("batchRequests") is not None:
        return (
            "a fireAndForget call with preRequest.batchRequests sends requests that are not known in advance"
        )
    retry = post.get("retryApiCallInstruction")
    if retry is not None:
        retries = (
            retry.get("maxRetries", DEFAULT_MAX_RETRIES) if isinstance(retry, dict) else DEFAULT_MAX_RETRIES
        )
        if not isinstance(retries, int | float) or isinstance(retries, bool) or retries >= 1:
            return "postResponse.retryApiCallInstruction may send the request again"
    return None
