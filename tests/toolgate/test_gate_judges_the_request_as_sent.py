"""The gate judges the request that is sent, not the template (toolgate.gate, toolgate.http_requests).

The model fills a tool's templates with whatever it likes. A value may fill its own segment of the path
and nothing more: a dot segment is refused, a value in ``targetServerUrl`` never changes the scheme, host
or port, and a requireApproval pattern gates the request as it will be sent (method and path, raw and
decoded, in any case), at gate time and again just before each request leaves.
"""

from __future__ import annotations

import json

import pytest

from approvals.models import Pause, PauseStatus
from harnesses.agents import http_tool_agent, one_call
from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.factories import deployed_agent, say, start

pytestmark = pytest.mark.django_db

ADMIN_GATED = {"requireApproval": ["http.get:/v1/admin/*"]}


def said(client, document: dict) -> tuple[str, dict]:
    conversation_id = start(client, deployed_agent(document))
    response = say(client, conversation_id, "go")
    assert response.status_code == 200, response.content
    return conversation_id, response.json()


def tool_results(conversation_id: str) -> list[dict]:
    """What the model read back from its tools (the ``Done: {toolResults}`` reply of the script)."""
    from conversations.models import ConversationStep

    step = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()
    reply = next(text for text in step.output if text.startswith("Done: "))
    return json.loads(reply.removeprefix("Done: "))


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": "..", "sub": "admin", "field": "secrets"},
        {"id": "x", "sub": "..", "field": "..%2Fadmin"},
        {"id": "..%2F..%2Fadmin", "sub": "a", "field": "b"},
        {"id": "%2e%2e", "sub": "admin", "field": "secrets"},
        {"id": "..;", "sub": "admin", "field": "secrets"},
        {"id": ".", "sub": "..\\..", "field": "admin"},
    ],
    ids=[
        "dot-dot",
        "encoded-slash",
        "encoded-dots-and-slashes",
        "percent-dots",
        "path-parameter",
        "backslash",
    ],
)
def test_a_dot_segment_in_a_substituted_value_never_reaches_another_path(
    alice_client, echo_target: EchoTarget, arguments
):
    call = {
        "name": "read_user",
        "request": {"method": "GET", "path": "/v1/users/{args.id}/{args.sub}/{args.field}"},
    }
    document = http_tool_agent(
        echo_target.url, [call], one_call("read_user", arguments), tool_approvals=ADMIN_GATED
    )
    conversation_id, answer = said(alice_client, document)
    assert answer["state"] == "READY"
    assert echo_target.received == []
    (result,) = tool_results(conversation_id)
    assert "'.' or '..' segment" in json.dumps(result)


@pytest.mark.parametrize(
    ("section", "gated"),
    [("admin", True), ("ADMIN", True), ("Admin", True), ("ａｄｍｉｎ", True), ("users", False)],
)
def test_a_require_pattern_gates_the_request_as_sent_not_only_its_template(
    alice_client, echo_target: EchoTarget, section, gated
):
    call = {"name": "read_items", "request": {"method": "GET", "path": "/v1/{args.section}/items"}}
    document = http_tool_agent(
        echo_target.url, [call], one_call("read_items", {"section": section}), tool_approvals=ADMIN_GATED
    )
    conversation_id, answer = said(alice_client, document)
    if gated:
        assert answer["state"] == "AWAITING_HUMAN"
        assert echo_target.received == []
        pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
        assert pause.tool_batch.calls.get().gate_reason == "http.get:/v1/admin/*"
    else:
        assert answer["state"] == "READY"
        assert [request.path for request in echo_target.received] == ["/v1/users/items"]


def test_a_value_in_target_server_url_never_changes_the_host_or_port(alice_client, echo_target: EchoTarget):
    """``{args.tenant}`` = ``127.0.0.1:<port>/internal#`` reached another port when values were substituted
    into targetServerUrl as they are; now it stays a host label (and that host does not resolve)."""
    with running_echo_target() as internal:
        call = {"name": "tenant_ping", "request": {"method": "GET", "path": "/ping"}}
        hostile = {"tenant": f"127.0.0.1:{internal.port}/internal#"}
        document = http_tool_agent(
            echo_target.url,
            [call],
            one_call("tenant_ping", hostile),
            target_server_url="http://{args.tenant}.tenants.invalid",
        )
        conversation_id, answer = said(alice_client, document)
        assert answer["state"] == "READY"
        assert internal.received == [] and echo_target.received == []
        (result,) = tool_results(conversation_id)
        assert "error" in json.dumps(result)


def test_a_value_in_the_path_of_target_server_url_stays_in_its_segment(alice_client, echo_target: EchoTarget):
    call = {"name": "tenant_ping", "request": {"method": "GET", "path": "/ping"}}
    base = echo_target.url + "/t/{args.tenant}"
    for tenant, reached in (("acme", "/t/acme/ping"), ("a?x=1#", "/t/a%3Fx%3D1%23/ping")):
        echo_target.received.clear()
        document = http_tool_agent(
            echo_target.url, [call], one_call("tenant_ping", {"tenant": tenant}), target_server_url=base
        )
        said(alice_client, document)
        assert [request.target for request in echo_target.received] == [reached]
    echo_target.received.clear()
    document = http_tool_agent(
        echo_target.url, [call], one_call("tenant_ping", {"tenant": "../admin"}), target_server_url=base
    )
    said(alice_client, document)
    assert echo_target.received == []


def test_a_request_that_becomes_gated_after_the_gate_is_refused_as_it_leaves(
    alice_client, echo_target: EchoTarget
):
    """A call whose preRequest writes the property its path uses resolves to an ungated path at gate time
    (the instructions do not run then); the request it builds to send is judged again and not sent."""
    call = {
        "name": "read_section",
        "request": {"method": "GET", "path": "/v1/{properties.section}/items"},
        "preRequest": {"propertyInstructions": [{"name": "section", "valueString": "{args.section}"}]},
    }
    document = http_tool_agent(
        echo_target.url, [call], one_call("read_section", {"section": "admin"}), tool_approvals=ADMIN_GATED
    )
    conversation_id, answer = said(alice_client, document)
    assert answer["state"] == "READY"
    assert echo_target.received == []
    (result,) = tool_results(conversation_id)
    assert result["status"] == "NOT_EXECUTED" and "needs approval (http.get:/v1/admin/*)" in json.dumps(
        result
    )
