"""preRequest and postResponse of declared http calls run as declared, against a real server on loopback.

Rule-fired calls (conversations.pipeline.httpcalls_task) and http tools (toolgate.runtime.sources.http) share one
implementation (toolgate.outbound.http_calls); both paths are exercised here.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from conversations.pipeline import httpcalls_task
from conversations.pipeline.conversation_memory import Caller, ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from tests.conftest import CANARY_SECRET_NAME
from tests.conversations.conftest import LoopbackServer
from toolgate.gate.tools import ToolContext
from toolgate.outbound.http_calls import CallEffects, run_http_call
from toolgate.runtime.sources.http import http_tools

TURN = TurnContext({}, "c1")
FAST = {"exponentialBackoffDelayInMillis": 1}


def task_with(server_url: str, **call: Any) -> dict[str, Any]:
    declared = {"name": "poll", "actions": ["go"], "request": {"method": "GET", "path": "/jobs"}, **call}
    return {"id": "jobs", "type": "httpcalls", "targetServerUrl": server_url, "calls": [declared]}


def memory_for(**properties: Any) -> ConversationMemory:
    return ConversationMemory(
        "conv-7f3a",
        current=Step(input="order 7", actions=["go"]),
        properties=dict(properties),
        caller=Caller("alice"),
    )


def fire(task: dict[str, Any], memory: ConversationMemory | None = None) -> ConversationMemory:
    memory = memory or memory_for()
    httpcalls_task.run(task, memory, TURN)
    return memory


def paths(server: LoopbackServer) -> list[str]:
    return [request.path for request in server.received]


# --- preRequest ------------------------------------------------------------------------------------------


def test_pre_request_property_instructions_run_before_the_request_is_built(loopback_server) -> None:
    task = task_with(
        loopback_server.url,
        request={
            "method": "POST",
            "path": "/orders/{properties.orderRef}",
            "body": {"step": "{memory.current.properties.stage}"},
        },
        preRequest={
            "propertyInstructions": [
                {"name": "orderRef", "valueString": "{memory.current.input}-{properties.region}"},
                {"name": "stage", "valueString": "draft for {properties.orderRef}", "scope": "step"},
            ]
        },
    )
    memory = fire(task, memory_for(region="eu"))

    (received,) = loopback_server.received
    assert received.path == "/orders/order%207-eu"
    assert received.json() == {"step": "draft for order 7-eu"}
    assert memory.properties["orderRef"] == "order 7-eu"
    assert memory.current.outputs["properties"] == {"stage": "draft for order 7-eu"}


def test_a_pre_request_value_read_by_path_is_stored_as_it_is_never_rendered_again(loopback_server) -> None:
    memory = memory_for(profile={"tier": "gold", "note": "{properties.secretPlan}"}, secretPlan="x")
    task = task_with(
        loopback_server.url,
        preRequest={
            "propertyInstructions": [
                {"name": "copied", "fromObjectPath": "properties.profile"},
                {"name": "note", "fromObjectPath": "properties.profile.note"},
                {"name": "missing", "fromObjectPath": "memory.current.nothing.here"},
                {
                    "name": "parsed",
                    "valueString": '{"tier": "{properties.profile.tier}"}',
                    "convertToObject": True,
                },
            ]
        },
    )
    fire(task, memory)
    assert memory.properties["copied"] == {"tier": "gold", "note": "{properties.secretPlan}"}
    assert memory.properties["note"] == "{properties.secretPlan}"
    assert memory.properties["missing"] == ""
    assert memory.properties["parsed"] == {"tier": "gold"}


def test_resolve_for_pinning_never_runs_pre_request_property_instructions(loopback_server) -> None:
    call = {
        "name": "order",
        "parameters": {"type": "object"},
        "request": {"method": "POST", "path": "/orders/{properties.orderRef}"},
        "preRequest": {"propertyInstructions": [{"name": "orderRef", "valueString": "r-1"}]},
    }
    (tool,) = http_tools({"id": "t", "targetServerUrl": loopback_server.url, "calls": [call]})
    written: list[tuple[str, Any, str]] = []
    context = ToolContext(
        conversation_id="conv-7f3a",
        template_data={"properties": {}},
        set_property=lambda *write: written.append(write),
    )
    built = tool.resolve({}, context)
    assert built.url.endswith("/orders/") and written == [] and loopback_server.received == []
    assert tool.unpinnable_reason is not None
    tool.run({}, context)
    assert written == [("orderRef", "r-1", "conversation")]
    assert paths(loopback_server) == ["/orders/r-1"]


def test_delay_before_executing_waits_before_the_first_attempt(loopback_server) -> None:
    started = time.monotonic()
    fire(task_with(loopback_server.url, preRequest={"delayBeforeExecutingInMillis": 150}))
    assert time.monotonic() - started >= 0.15
    assert paths(loopback_server) == ["/jobs"]


# --- retries ---------------------------------------------------------------------------------------------


def test_retry_on_http_code_retries_up_to_max_retries(loopback_server) -> None:
    loopback_server.respond("/jobs", status=503, json_body={"busy": True})
    memory = fire(
        task_with(loopback_server.url, postResponse={"retryApiCallInstruction": {"maxRetries": 2, **FAST}})
    )
    assert paths(loopback_server) == ["/jobs"] * 3
    assert memory.current.outputs["poll"] == {"status": 503, "body": {"busy": True}, "attempts": 3}
    assert [record["attempt"] for record in memory.current.data["httpcalls:requests"]] == [1, 2, 3]


def test_retry_stops_at_the_first_status_that_is_not_retried(loopback_server) -> None:
    loopback_server.respond_in_turn("/jobs", (502, {"e": 1}), (429, {"e": 2}), (200, {"id": "j-1"}))
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={"retryApiCallInstruction": {"retryOnHttpCodes": [429, 502], **FAST}},
        )
    )
    assert len(loopback_server.received) == 3
    assert memory.current.outputs["poll"] == {"status": 200, "body": {"id": "j-1"}, "attempts": 3}


def test_retry_on_default_codes_only_502_and_503(loopback_server) -> None:
    loopback_server.respond("/jobs", status=500, json_body={})
    memory = fire(task_with(loopback_server.url, postResponse={"retryApiCallInstruction": FAST}))
    assert len(loopback_server.received) == 1
    assert memory.current.outputs["poll"]["attempts"] == 1


def test_retry_on_response_value_path_match(loopback_server) -> None:
    loopback_server.respond_in_turn(
        "/jobs",
        (200, {"state": "pending"}),
        (200, {"state": "pending"}),
        (200, {"state": "done", "id": "j-9"}),
    )
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "retryApiCallInstruction": {
                    "maxRetries": 5,
                    **FAST,
                    "responseValuePathMatchers": [
                        {"valuePath": "memory.current.poll.body.state", "equals": "pending"}
                    ],
                }
            },
        )
    )
    assert len(loopback_server.received) == 3
    assert memory.current.outputs["poll"] == {
        "status": 200,
        "body": {"state": "done", "id": "j-9"},
        "attempts": 3,
    }


def test_true_if_no_match_retries_until_the_value_appears(loopback_server) -> None:
    loopback_server.respond_in_turn(
        "/jobs", (200, {"tags": ["queued"]}), (200, {"tags": ["queued", "ready"]})
    )
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "retryApiCallInstruction": {
                    **FAST,
                    "responseValuePathMatchers": [
                        {
                            "valuePath": "memory.current.poll.body.tags",
                            "contains": "ready",
                            "trueIfNoMatch": True,
                        }
                    ],
                }
            },
        )
    )
    assert len(loopback_server.received) == 2
    assert memory.current.outputs["poll"]["body"] == {"tags": ["queued", "ready"]}


def test_no_retry_when_max_retries_zero(loopback_server) -> None:
    loopback_server.respond("/jobs", status=503, json_body={})
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "retryApiCallInstruction": {
                    "maxRetries": 0,
                    "responseValuePathMatchers": [{"valuePath": "memory.current.poll.status"}],
                }
            },
        )
    )
    assert len(loopback_server.received) == 1
    assert memory.current.outputs["poll"] == {"status": 503, "body": {}}


def test_a_request_that_cannot_be_sent_is_not_retried(settings) -> None:
    settings.HITL_HTTP_TIMEOUT_SECONDS = 2
    memory = fire(task_with("http://127.0.0.1:1", postResponse={"retryApiCallInstruction": FAST}))
    assert set(memory.current.outputs["poll"]) == {"error", "attempts"}
    assert len(memory.current.data["httpcalls:requests"]) == 1


def test_retry_rebuilds_request_from_updated_memory(loopback_server) -> None:
    loopback_server.respond("/jobs/start", json_body={"state": "pending", "next": "j-2"})
    loopback_server.respond("/jobs/j-2", json_body={"state": "done"})
    task = task_with(
        loopback_server.url,
        request={
            "method": "GET",
            "path": "/jobs/{memory.current.poll.body.next}",
            "queryParams": {"previous": "{memory.current.poll.status}"},
        },
        postResponse={
            "retryApiCallInstruction": {
                **FAST,
                "responseValuePathMatchers": [
                    {"valuePath": "memory.current.poll.body.state", "equals": "pending"}
                ],
            }
        },
    )
    memory = memory_for()
    memory.current.outputs["poll"] = {"body": {"next": "start"}}  # what an earlier call left
    fire(task, memory)
    assert paths(loopback_server) == ["/jobs/start", "/jobs/j-2"]
    assert [request.query for request in loopback_server.received] == [
        [("previous", "")],
        [("previous", "200")],
    ]
    assert memory.current.outputs["poll"]["body"] == {"state": "done"}


def test_backoff_doubles_each_retry_up_to_ten_seconds_of_waiting_in_all(loopback_server) -> None:
    loopback_server.respond("/jobs", status=503, json_body={})
    waits: list[float] = []
    task = task_with(
        loopback_server.url,
        preRequest={"delayBeforeExecutingInMillis": 1000},
        postResponse={"retryApiCallInstruction": {"maxRetries": 4, "maxBackoffDelayInMillis": 3000}},
    )
    result = run_http_call(
        task, task["calls"][0], {}, caller_token=None, effects=CallEffects(), sleep=waits.append
    )
    assert len(loopback_server.received) == 5 and result["attempts"] == 5
    assert waits == [1.0, 1.0, 2.0, 3.0, 3.0]
    assert sum(waits) == 10


def test_max_backoff_caps_each_wait(loopback_server) -> None:
    loopback_server.respond("/jobs", status=503, json_body={})
    waits: list[float] = []
    task = task_with(
        loopback_server.url,
        postResponse={
            "retryApiCallInstruction": {
                "maxRetries": 4,
                "exponentialBackoffDelayInMillis": 100,
                "maxBackoffDelayInMillis": 250,
            }
        },
    )
    run_http_call(task, task["calls"][0], {}, caller_token=None, effects=CallEffects(), sleep=waits.append)
    assert waits == [0.1, 0.2, 0.25, 0.25]


def test_retries_really_wait_between_attempts(loopback_server) -> None:
    loopback_server.respond("/jobs", status=503, json_body={})
    started = time.monotonic()
    fire(
        task_with(
            loopback_server.url,
            postResponse={
                "retryApiCallInstruction": {"maxRetries": 2, "exponentialBackoffDelayInMillis": 40}
            },
        )
    )
    assert len(loopback_server.received) == 3
    assert time.monotonic() - started >= 0.12  # 40 ms, then 80 ms


# --- postResponse ----------------------------------------------------------------------------------------


def test_post_response_writes_properties(loopback_server) -> None:
    loopback_server.respond(
        "/jobs",
        status=201,
        json_body={"id": "j-5", "links": {"self": "/jobs/j-5"}, "meta": '{"owner": "ops"}'},
    )
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "propertyInstructions": [
                    {"name": "jobId", "fromObjectPath": "memory.current.poll.body.id"},
                    {"name": "jobLinks", "fromObjectPath": "memory.current.poll.body.links"},
                    {
                        "name": "summary",
                        "valueString": "job {memory.current.poll.body.id} ({memory.current.poll.status})",
                    },
                    {
                        "name": "meta",
                        "fromObjectPath": "memory.current.poll.body.meta",
                        "convertToObject": True,
                    },
                    {"name": "seen", "valueString": "yes", "scope": "step"},
                ]
            },
        )
    )
    assert memory.properties == {
        "jobId": "j-5",
        "jobLinks": {"self": "/jobs/j-5"},
        "summary": "job j-5 (201)",
        "meta": {"owner": "ops"},
    }
    assert memory.current.outputs["properties"] == {"seen": "yes"}


def test_post_response_property_instructions_follow_their_http_code_validator(loopback_server) -> None:
    loopback_server.respond("/jobs", status=404, json_body={"error": "gone"})
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "propertyInstructions": [
                    {"name": "onDefault", "valueString": "ran"},
                    {
                        "name": "onMissing",
                        "valueString": "{memory.current.poll.body.error}",
                        "httpCodeValidator": {"runOnHttpCode": [404], "skipOnHttpCode": []},
                    },
                ]
            },
        )
    )
    assert memory.properties == {"onMissing": "gone"}


def test_post_response_reads_the_final_attempt(loopback_server) -> None:
    loopback_server.respond_in_turn("/jobs", (503, {"n": 1}), (200, {"n": 2}))
    memory = fire(
        task_with(
            loopback_server.url,
            postResponse={
                "retryApiCallInstruction": FAST,
                "propertyInstructions": [{"name": "n", "fromObjectPath": "memory.current.poll.body.n"}],
            },
        )
    )
    assert memory.properties["n"] == 2


def test_post_response_does_not_run_when_the_request_was_not_sent() -> None:
    memory = fire(
        task_with(
            "http://127.0.0.1:1",
            postResponse={
                "propertyInstructions": [
                    {
                        "name": "x",
                        "valueString": "ran",
                        "httpCodeValidator": {"runOnHttpCode": [200], "skipOnHttpCode": []},
                    }
                ]
            },
        )
    )
    assert "x" not in memory.properties and "error" in memory.current.outputs["poll"]


# --- secrets, refusals -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_retry_loop_never_puts_a_resolved_secret_into_memory(loopback_server, canary_secret) -> None:
    loopback_server.respond_in_turn(
        "/jobs",
        (503, {"echo": f"key={canary_secret}"}),
        (200, {"echo": f"Bearer {canary_secret}", "id": canary_secret}),
    )
    task = task_with(
        loopback_server.url,
        request={
            "method": "POST",
            "path": "/jobs",
            "headers": {"X-Key": f"${{vault:{CANARY_SECRET_NAME}}}"},
            "body": {"key": f"${{vault:{CANARY_SECRET_NAME}}}"},
        },
        postResponse={
            "retryApiCallInstruction": FAST,
            "propertyInstructions": [
                {"name": "echo", "fromObjectPath": "memory.current.poll.body.echo"},
                {"name": "all", "valueString": "{memory.current.poll.body}"},
            ],
        },
    )
    memory = fire(task)
    assert len(loopback_server.received) == 2
    assert all(request.json() == {"key": canary_secret} for request in loopback_server.received)
    everything = json.dumps(
        {"outputs": memory.current.outputs, "data": memory.current.data, "properties": memory.properties}
    )
    assert canary_secret not in everything
    assert memory.current.outputs["poll"]["body"]["id"] == "<REDACTED>"


def test_a_stored_call_with_a_refused_field_is_not_sent(loopback_server) -> None:
    memory = fire(task_with(loopback_server.url, postResponse={"retryApiCallInstruction": {"maxRetrys": 2}}))
    assert loopback_server.received == []
    assert memory.current.outputs["poll"] == {
        "error": (
            "postResponse.retryApiCallInstruction.maxRetrys: 'maxRetrys' is not a retryApiCallInstruction field "
            "(did you mean 'maxRetries'?)"
        )
    }


# --- the same through an http tool ------------------------------------------------------------------------


def test_an_http_tool_retries_and_writes_properties_through_the_tool_context(loopback_server) -> None:
    loopback_server.respond_in_turn("/jobs", (503, {}), (200, {"id": "j-3"}))
    call = {
        "name": "create_job",
        "parameters": {"type": "object"},
        "request": {"method": "POST", "path": "/jobs"},
        "preRequest": {"propertyInstructions": [{"name": "by", "valueString": "{args.who}"}]},
        "postResponse": {
            "retryApiCallInstruction": FAST,
            "propertyInstructions": [
                {"name": "jobId", "fromObjectPath": "memory.current.create_job.body.id", "scope": "step"}
            ],
        },
    }
    (tool,) = http_tools({"id": "t", "targetServerUrl": loopback_server.url, "calls": [call]})
    written: list[tuple[str, Any, str]] = []
    context = ToolContext(conversation_id="conv-7f3a", set_property=lambda *write: written.append(write))
    assert tool.run({"who": "alice"}, context) == {"status": 200, "body": {"id": "j-3"}, "attempts": 2}
    assert len(loopback_server.received) == 2
    assert written == [("by", "alice", "conversation"), ("jobId", "j-3", "step")]


def test_an_http_tool_with_property_instructions_but_no_memory_is_refused(loopback_server) -> None:
    call = {
        "name": "create_job",
        "parameters": {"type": "object"},
        "request": {"path": "/jobs"},
        "postResponse": {"propertyInstructions": [{"name": "x", "valueString": "y"}]},
    }
    (tool,) = http_tools({"id": "t", "targetServerUrl": loopback_server.url, "calls": [call]})
    assert "error" in tool.run({}, ToolContext(conversation_id="conv-7f3a"))
    assert loopback_server.received == []


def test_every_attempt_of_an_http_tool_is_checked_by_the_self_conversation_guard(loopback_server) -> None:
    loopback_server.respond("/jobs/", json_body={"state": "pending", "next": "conv-7f3a"})
    call = {
        "name": "poll_job",
        "parameters": {"type": "object"},
        "request": {"path": "/jobs/{memory.current.poll_job.body.next}"},
        "postResponse": {
            "retryApiCallInstruction": {
                **FAST,
                "responseValuePathMatchers": [
                    {"valuePath": "memory.current.poll_job.body.state", "equals": "pending"}
                ],
            }
        },
    }
    (tool,) = http_tools({"id": "t", "targetServerUrl": loopback_server.url, "calls": [call]})
    result = tool.run({}, ToolContext(conversation_id="conv-7f3a"))
    assert result == {
        "status": "NOT_EXECUTED",
        "reason": "an agent may not send a request to its own conversation",
    }
    assert paths(loopback_server) == ["/jobs/"]
