"""Declared HTTP calls against a real HTTP server on loopback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conversations.pipeline import httpcalls_task
from conversations.pipeline.conversation_memory import Caller, ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from toolgate.outbound import http_calls
from toolgate.outbound.http_requests import (
    PrivateAddressError,
    SecretReferenceError,
    build_request,
    resolve_secret_references,
    send_request,
)

TURN = TurnContext({}, "c1")


def payments_task(server_url: str, **call_overrides: Any) -> dict[str, Any]:
    call = {
        "name": "payments",
        "actions": ["make_payment"],
        "request": {
            "method": "post",
            "path": "/accounts/{properties.account}/payments",
            "headers": {"X-Channel": "{context.channel}", "Authorization": "Bearer ${env:PAYMENTS_TOKEN}"},
            "queryParams": {"dryRun": "false", "ref": "{memory.current.input}"},
            "body": {"amount": "{properties.amount}", "meta": {"note": "for {properties.account}"}, "n": 5},
        },
    }
    call.update(call_overrides)
    return {"id": "payments", "type": "httpcalls", "targetServerUrl": server_url, "calls": [call]}


def memory_for(actions: list[str], token: str = "") -> ConversationMemory:
    return ConversationMemory(
        "c1",
        current=Step(input="order 7", actions=actions, context={"channel": "web"}),
        properties={"account": "acc-1", "amount": "12.50"},
        caller=Caller("alice", given_token=token),
    )


@pytest.fixture
def payments_token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PAYMENTS_TOKEN", "s3cret-value")
    return "s3cret-value"


def test_call_fired_by_action_sends_rendered_request_and_stores_response(
    loopback_server, payments_token
) -> None:
    loopback_server.respond(
        "/accounts/acc-1/payments", status=201, json_body={"id": "p-9", "state": "queued"}
    )
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task(loopback_server.url), memory, TURN)

    [received] = loopback_server.received
    assert received.method == "POST"
    assert received.path == "/accounts/acc-1/payments"
    assert received.query == [("dryRun", "false"), ("ref", "order 7")]
    assert received.headers["x-channel"] == "web"
    assert received.headers["authorization"] == "Bearer s3cret-value"
    assert received.headers["content-type"] == "application/json"
    assert received.json() == {"amount": "12.50", "meta": {"note": "for acc-1"}, "n": 5}
    assert memory.current.outputs["payments"] == {"status": 201, "body": {"id": "p-9", "state": "queued"}}


def test_sent_record_redacts_sensitive_header_values(loopback_server, payments_token) -> None:
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task(loopback_server.url), memory, TURN)
    [record] = memory.current.data["httpcalls:requests"]
    assert record["call"] == "payments"
    assert record["method"] == "POST"
    assert record["url"] == f"{loopback_server.url}/accounts/acc-1/payments"
    assert record["headers"]["Authorization"] == "<REDACTED>"
    assert record["headers"]["X-Channel"] == "web"
    assert "s3cret-value" not in json.dumps(record)


def test_sent_record_redacts_url_query_and_body_but_the_request_sent_is_unchanged(loopback_server) -> None:
    key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv"
    request = {
        "method": "POST",
        "path": f"/keys/{key}",
        "queryParams": {"api_key": "q-secret-123", "limit": "10"},
        "headers": {"X-Client-Auth": "Bearer abcdefghijklmnopqrstuvwxyz012"},
        "body": {"password": "hunter2hunter2", "note": "kept"},
    }
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task(loopback_server.url, request=request), memory, TURN)

    [received] = loopback_server.received
    assert received.path == f"/keys/{key}"
    assert received.query == [("api_key", "q-secret-123"), ("limit", "10")]
    assert received.headers["x-client-auth"] == "Bearer abcdefghijklmnopqrstuvwxyz012"
    assert received.json() == {"password": "hunter2hunter2", "note": "kept"}
    [record] = memory.current.data["httpcalls:requests"]
    assert record["url"] == f"{loopback_server.url}/keys/sk-<REDACTED>"
    assert record["query"] == [["api_key", "<REDACTED>"], ["limit", "10"]]
    assert record["headers"]["X-Client-Auth"] == "Bearer <REDACTED>"
    assert json.loads(record["body"]) == {"password": "<REDACTED>", "note": "kept"}
    for secret in (key, "q-secret-123", "abcdefghijklmnopqrstuvwxyz012", "hunter2hunter2"):
        assert secret not in json.dumps(record)


def test_call_does_not_fire_without_its_action_and_calls_without_actions_never_fire(loopback_server) -> None:
    task = payments_task(loopback_server.url)
    task["calls"].append({"name": "tool_only", "request": {"method": "GET", "path": "/tool"}})
    memory = memory_for(["something_else", "tool_only"])
    httpcalls_task.run(task, memory, TURN)
    assert loopback_server.received == []
    assert "payments" not in memory.current.outputs and "tool_only" not in memory.current.outputs


def test_text_response_body_is_stored_as_text(loopback_server) -> None:
    loopback_server.respond("/plain", text="all good")
    task = payments_task(loopback_server.url, request={"method": "GET", "path": "/plain"})
    memory = memory_for(["make_payment"])
    httpcalls_task.run(task, memory, TURN)
    assert memory.current.outputs["payments"] == {"status": 200, "body": "all good"}


def test_args_from_template_data_fill_path_and_are_percent_encoded(loopback_server) -> None:
    call = {
        "name": "lookup",
        "request": {"method": "GET", "path": "/users/{args.id}", "queryParams": {"q": "{args.q}"}},
    }
    built = build_request(
        {"targetServerUrl": loopback_server.url + "/"},
        call,
        {"args": {"id": "a/b?c", "q": "x&y=z"}},
        caller_token=None,
    )
    assert built.url == f"{loopback_server.url}/users/a%2Fb%3Fc"
    assert built.query == [("q", "x&y=z")]
    result = send_request(built, timeout=5)
    [received] = loopback_server.received
    assert received.path == "/users/a%2Fb%3Fc"
    assert received.query == [("q", "x&y=z")]
    assert result.status == 200 and result.body == {"ok": True}


def test_caller_token_reference_in_header_resolves_to_the_callers_token(loopback_server) -> None:
    task = payments_task(
        loopback_server.url,
        request={"method": "GET", "path": "/me", "headers": {"X-User-Token": "${caller:token}"}},
    )
    httpcalls_task.run(task, memory_for(["make_payment"], token="tok-alice"), TURN)
    assert loopback_server.received[0].headers["x-user-token"] == "tok-alice"


def test_caller_token_reference_outside_headers_is_refused() -> None:
    call = {"name": "c", "request": {"method": "GET", "path": "/x", "queryParams": {"t": "${caller:token}"}}}
    with pytest.raises(SecretReferenceError, match=r"\$\{caller:token\}"):
        build_request({"targetServerUrl": "http://example.test"}, call, {}, caller_token="tok")


def test_unknown_env_reference_fails_the_call_naming_the_reference_not_crashing_the_turn(
    loopback_server, monkeypatch
) -> None:
    monkeypatch.delenv("PAYMENTS_TOKEN", raising=False)
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task(loopback_server.url), memory, TURN)
    assert loopback_server.received == []
    assert memory.current.outputs["payments"] == {
        "error": "unknown environment variable: ${env:PAYMENTS_TOKEN}"
    }


@pytest.mark.django_db
def test_an_unknown_vault_reference_is_refused_naming_the_reference() -> None:
    with pytest.raises(SecretReferenceError, match=r"unknown secret: \$\{vault:API_KEY\}"):
        resolve_secret_references("Bearer ${vault:API_KEY}", caller_token=None, allow_caller=True)


def test_substituted_values_cannot_smuggle_in_secret_references(loopback_server, payments_token) -> None:
    call = {"name": "echo", "request": {"method": "POST", "path": "/echo", "body": {"text": "{args.text}"}}}
    built = build_request(
        {"targetServerUrl": loopback_server.url},
        call,
        {"args": {"text": "${env:PAYMENTS_TOKEN}"}},
        caller_token=None,
    )
    assert json.loads(built.body) == {"text": "${env:PAYMENTS_TOKEN}"}


def test_deny_private_refuses_loopback_targets(loopback_server, settings) -> None:
    settings.HITL_HTTP_DENY_PRIVATE = True
    built = build_request(
        {"targetServerUrl": loopback_server.url}, {"request": {"path": "/x"}}, {}, caller_token=None
    )
    with pytest.raises(PrivateAddressError, match="127.0.0.1"):
        send_request(built, timeout=5)
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task(loopback_server.url, request={"path": "/x"}), memory, TURN)
    assert "non-public address" in memory.current.outputs["payments"]["error"]
    assert loopback_server.received == []


def test_connection_failure_is_stored_as_error(settings) -> None:
    settings.HITL_HTTP_TIMEOUT_SECONDS = 2
    memory = memory_for(["make_payment"])
    httpcalls_task.run(payments_task("http://127.0.0.1:1", request={"path": "/x"}), memory, TURN)
    assert set(memory.current.outputs["payments"]) == {"error"}


def test_fire_and_forget_sends_but_does_not_store_the_body(loopback_server) -> None:
    loopback_server.respond("/notify", json_body={"ignored": True})
    task = payments_task(loopback_server.url, request={"method": "POST", "path": "/notify", "body": {"a": 1}})
    task["calls"][0]["fireAndForget"] = True
    memory = memory_for(["make_payment"])
    httpcalls_task.run(task, memory, TURN)
    assert loopback_server.received[0].json() == {"a": 1}
    assert memory.current.outputs["payments"] == {"sent": True, "status": 200}


def test_fire_and_forget_does_not_wait_for_a_slow_server(loopback_server, monkeypatch) -> None:
    monkeypatch.setattr(http_calls, "FIRE_AND_FORGET_TIMEOUT_SECONDS", 0.2)
    loopback_server.respond("/slow", json_body={}, delay_seconds=1.0)
    task = payments_task(loopback_server.url, request={"method": "POST", "path": "/slow"})
    task["calls"][0]["fireAndForget"] = True
    memory = memory_for(["make_payment"])
    httpcalls_task.run(task, memory, TURN)
    assert loopback_server.received[0].path == "/slow"
    assert memory.current.outputs["payments"] == {"sent": True, "status": None}


def test_string_body_is_rendered_and_sent_as_json_when_it_is_json(loopback_server) -> None:
    task = payments_task(
        loopback_server.url,
        request={
            "method": "PUT",
            "path": "/raw",
            "body": '{"account": "{properties.account}", "nested": {"k": 1}}',
        },
    )
    httpcalls_task.run(task, memory_for(["make_payment"]), TURN)
    [received] = loopback_server.received
    assert received.method == "PUT"
    assert received.headers["content-type"] == "application/json"
    assert received.json() == {"account": "acc-1", "nested": {"k": 1}}
