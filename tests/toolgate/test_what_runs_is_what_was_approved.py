"""What runs must be what was approved: the query that is sent is the query that was previewed and pinned.

A recorder on loopback sees the bytes that are sent; the preview and the fingerprint are derived from the
same request object (``BuiltRequest.outgoing()``), so every way of declaring a query must arrive intact.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from approvals.models import Pause, PauseStatus
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.execution import UNCHECKABLE, run_call
from toolgate.http_requests import BuiltRequest, build_request
from toolgate.models import UNRESOLVED_FINGERPRINT, PendingToolCall
from toolgate.pinning import UNRESOLVED_AT_GATE, pin, request_fingerprint, request_preview
from toolgate.sources.http import http_tools
from toolgate.tools import Tool, ToolCall, ToolContext, ToolSet

DECLARED_QUERIES = {
    "path-template query": ({"path": "/deploy/{args.ref}?version=3"}, [("version", "3")]),
    "queryParams": ({"path": "/deploy/{args.ref}", "queryParams": {"version": "3"}}, [("version", "3")]),
    "both, template first": (
        {"path": "/deploy/{args.ref}?version=3", "queryParams": {"force": "true"}},
        [("version", "3"), ("force", "true")],
    ),
    "repeated names": (
        {"path": "/deploy/{args.ref}?tag=a&tag=b", "queryParams": {"tag": ["c", "d"]}},
        [("tag", "a"), ("tag", "b"), ("tag", "c"), ("tag", "d")],
    ),
    "encoded values": (
        {"path": "/deploy/{args.ref}?note=a%20b%26c&empty=&flag", "queryParams": {"q": "x y&z=1/é"}},
        [("note", "a b&c"), ("empty", ""), ("flag", ""), ("q", "x y&z=1/é")],
    ),
    "substituted values cannot add a pair": (
        {"path": "/deploy/{args.ref}?version={args.version}"},
        [("version", "3&admin=1#frag")],
    ),
    "target server url query first": (
        {"path": "/deploy/{args.ref}?version=3", "base": "/api?tenant=t1"},
        [("tenant", "t1"), ("version", "3")],
    ),
}


def deploy_tool(server_url: str, request: dict) -> Tool:
    base = request.pop("base", "")
    task = {
        "id": "ops",
        "type": "httpcalls",
        "targetServerUrl": server_url + base,
        "calls": [
            {"name": "deploy", "parameters": {"type": "object"}, "request": {"method": "POST", **request}}
        ],
    }
    (tool,) = http_tools(task)
    return tool


def received_query(record: dict) -> list[tuple[str, str]]:
    return parse_qsl(record["query"], keep_blank_values=True)


@pytest.mark.parametrize("declared", DECLARED_QUERIES.values(), ids=DECLARED_QUERIES.keys())
def test_what_runs_is_what_was_approved_for_every_query_shape(http_recorder, declared):
    request, expected = declared
    tool = deploy_tool(http_recorder.url, dict(request))
    context = ToolContext(conversation_id="conv-1")
    args = {"ref": "v1.2", "version": "3&admin=1#frag"}
    built = tool.resolve(args, context)
    preview = request_preview(built)
    approved_fingerprint = request_fingerprint(built)

    assert tool.run(args, context)["status"] == 200
    (sent,) = http_recorder.requests
    assert sent["path"].endswith("/deploy/v1.2")
    assert received_query(sent) == expected
    # the preview shows, and the fingerprint covers, exactly what the recorder received
    assert built.target()[1] == expected
    shown: dict[str, list[str]] = {}
    for name, value in expected:
        shown.setdefault(name, []).append(value)
    assert preview["queryParams"] == {name: ", ".join(values) for name, values in sorted(shown.items())}
    assert "?" not in preview["uri"]
    assert request_fingerprint(tool.resolve(args, context)) == approved_fingerprint


def test_a_query_in_the_url_is_part_of_the_fingerprint():
    plain = BuiltRequest("POST", "https://api.example/deploy/7", [])
    with_query = BuiltRequest("POST", "https://api.example/deploy/7?version=3", [])
    assert with_query.url == "https://api.example/deploy/7" and with_query.query == [("version", "3")]
    assert request_fingerprint(plain) != request_fingerprint(with_query)
    assert str(with_query.outgoing().url) == "https://api.example/deploy/7?version=3"


def test_a_rule_call_sends_the_query_of_its_path_template(http_recorder):
    from conversations.pipeline.httpcalls import sent_record

    task = {
        "id": "ops",
        "type": "httpcalls",
        "targetServerUrl": http_recorder.url,
        "calls": [
            {
                "name": "ping",
                "actions": ["ping"],
                "request": {"method": "GET", "path": "/ping?version=3", "queryParams": {"k": "v"}},
            }
        ],
    }
    built = build_request(task, task["calls"][0], {}, caller_token=None)
    record = sent_record("ping", built)
    from toolgate.http_requests import send_request

    send_request(built, timeout=5)
    (sent,) = http_recorder.requests
    assert received_query(sent) == [("version", "3"), ("k", "v")]
    assert record["url"] == f"{http_recorder.url}/ping" and record["query"] == [["version", "3"], ["k", "v"]]


@pytest.mark.django_db
def test_an_approved_path_template_query_is_sent_as_previewed(alice_client, approver_client, http_recorder):
    document = payments_agent(http_recorder.url)
    transfer = document["workflows"][0]["tasks"][1]["calls"][0]
    transfer["request"]["path"] = "/transfers/{args.to}?version=3"
    transfer["request"]["queryParams"] = {"dry": "false"}
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "please transfer").json()["state"] == "AWAITING_HUMAN"

    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is True
    assert call["requestPreview"]["uri"] == f"{http_recorder.url}/transfers/bob"
    assert call["requestPreview"]["queryParams"] == {"dry": "false", "version": "3"}
    assert http_recorder.requests == []

    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    run_queued_tasks()
    (sent,) = [r for r in http_recorder.requests if r["path"].startswith("/transfers")]
    assert sent["path"] == "/transfers/bob"
    assert received_query(sent) == [("version", "3"), ("dry", "false")]


def broken_tool() -> Tool:
    def resolve(args, ctx):
        raise RuntimeError("resolver exploded")

    return Tool(
        name="deploy",
        source="http",
        description="",
        parameters={"type": "object"},
        run=lambda args, ctx: {"ran": True},
        endpoint="post:/deploy",
        resolve=resolve,
    )


def test_fail_closed_self_conversation_guard_refuses_a_request_it_cannot_resolve():
    tools = ToolSet()
    tools.add(broken_tool())
    result = run_call(ToolCall("c1", "deploy", "{}"), tools, ToolContext(conversation_id="conv-1"))
    assert result == UNCHECKABLE


@pytest.mark.django_db
def test_fail_closed_self_conversation_guard_names_a_build_error(http_recorder):
    tool = deploy_tool(http_recorder.url, {"path": "/deploy/${vault:no-such-secret}"})
    tools = ToolSet()
    tools.add(tool)
    result = run_call(ToolCall("c1", "deploy", "{}"), tools, ToolContext(conversation_id="conv-1"))
    assert result["status"] == "NOT_EXECUTED" and "unknown secret" in result["reason"]
    assert http_recorder.requests == []


def test_fail_closed_a_request_unresolvable_at_gate_time_is_never_pinned_as_fine():
    fingerprint, preview = pin(broken_tool(), "{}", ToolContext(conversation_id="conv-1"))
    assert (fingerprint, preview) == (UNRESOLVED_FINGERPRINT, None)


@pytest.mark.django_db
def test_fail_closed_an_approved_call_that_was_unresolvable_at_gate_time_is_refused(
    alice_client, approver_client, http_recorder
):
    document = payments_agent(http_recorder.url)
    transfer = document["workflows"][0]["tasks"][1]["calls"][0]
    transfer["request"]["headers"] = {"X-Key": "${vault:added-later}"}
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "please transfer").json()["state"] == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    stored = PendingToolCall.objects.get(batch__pause=pause)
    assert stored.request_fingerprint == UNRESOLVED_FINGERPRINT and not stored.request_pinned
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is False and call["requestPreview"] is None

    from toolgate.secret_store import set_secret

    set_secret(name="added-later", value="now-it-resolves-123")  # it would resolve now: still refused
    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    run_queued_tasks()
    assert [r for r in http_recorder.requests if r["path"].startswith("/transfers")] == []
    output = alice_client.get(f"/agents/{conversation_id}").json()["output"][-1]
    assert UNRESOLVED_AT_GATE in output
