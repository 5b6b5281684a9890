"""A secret never leaks through an encoding the redactor does not know (toolgate.redaction.encoded_forms,
toolgate.request_views).

A vault value with a space and an ``=`` (``CANARY-odd val=9z``) was percent-encoded by httpx in a path to
a form (``CANARY-odd%20val=9z``) none of the spellings the redactor knew covered: it reached the owner's
approval-status, MCP, the admin page, the database, the LLM provider's request and a DEBUG log line. Here
such values go into the path, the query, a header and the body of a gated tool call and of a rule-fired
call, the target echoes every byte back, and each value is searched — as written, JSON-escaped, and in
the exact form it had on the wire (read off the echo target) — in everything the service keeps or shows.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from approvals.models import Pause, PauseStatus
from conversations.pipeline import httpcalls
from conversations.pipeline.memory import Caller, ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from harnesses.echo_target import EchoTarget, Received
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from harnesses.stored_rows import stored_rows_text
from mcp_surface.conversation_tools import get_approval_status
from tests.toolgate.test_no_secret_in_logs import assert_canary_in_no_record, every_logger_at_debug
from toolgate.http_requests import SecretReferenceError, build_request
from toolgate.secret_store import set_secret

__all__ = ["every_logger_at_debug"]  # the fixture, imported to be used here

pytestmark = pytest.mark.django_db

# The finding's value, and one with every character class a URL encoder treats differently (but ? and #,
# which a secret written into a URL may not hold: test_a_secret_that_would_be_cut_in_a_url_is_refused).
ODD_VALUES = ["CANARY-odd val=9z", 'Canary "q" \\ ;:@!$&\'()*+,=~[]{}|^<> %41 end/x', "Cänary välue=ü 9"]
IDS = ["space-and-equals", "every-ascii-class", "non-ascii"]
REFERENCE = "${vault:odd}"


def request_with(secret: str) -> dict:
    """The value in the path, the path's query, queryParams, a header (a header is ASCII) and the body."""
    return {
        "method": "POST",
        "path": f"/t/{REFERENCE}/x?inpath={REFERENCE}",
        "queryParams": {"k": REFERENCE},
        "headers": {"X-K": REFERENCE} if secret.isascii() else {},
        "body": {"k": REFERENCE, "amount": "{args.amount}"},
    }


def wire_forms(received: Received, secret: str) -> set[str]:
    """Every spelling ``secret`` had in the request as received: path segment, query values, as written and
    JSON-escaped both ways."""
    path, _, query = received.target.partition("?")
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        path.split("/")[2],
    }
    forms |= {pair.partition("=")[2] for pair in query.split("&")}
    assert all(form for form in forms)
    return forms


def assert_in_none(forms: set[str], texts: dict[str, str]) -> None:
    for where, text in texts.items():
        for form in forms:
            assert form not in text, f"{form!r} leaked in {where}"


@pytest.mark.parametrize("secret", ODD_VALUES, ids=IDS)
def test_a_secret_in_a_gated_tool_call_reaches_the_target_in_every_encoding_and_nothing_else(
    alice_client,
    approver_client,
    approver,
    admin_user,
    echo_target: EchoTarget,
    chat_stub,
    every_logger_at_debug,
    secret,
):
    set_secret(name="odd", value=secret)
    chat_stub.reply("hello")  # the first turn of the conversation
    chat_stub.call_tools({"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 5}})
    chat_stub.reply("done")
    document = {
        "name": "odd-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "assistant",
                        "type": "llm",
                        "provider": {
                            "type": "openai",
                            "baseUrl": f"{chat_stub.url}/v1",
                            "apiKey": "sk-none",
                            "model": "m",
                        },
                        "tools": {"http": ["api"]},
                    },
                    {
                        "id": "api",
                        "type": "httpcalls",
                        "targetServerUrl": echo_target.url,
                        "calls": [
                            {
                                "name": "transfer_funds",
                                "parameters": {"type": "object"},
                                "request": request_with(secret),
                            }
                        ],
                    },
                ],
            }
        ],
        "hitlConfig": {"toolApprovals": {"requireApproval": ["transfer_*"]}},
    }
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "pay").json()["state"] == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    browser = Client()
    browser.force_login(admin_user)
    shown = {
        "owner's approval-status": alice_client.get(
            f"/agents/{conversation_id}/approval-status"
        ).content.decode(),
        "approver's approval-status": approver_client.get(
            f"/agents/{conversation_id}/approval-status?detail=full"
        ).content.decode(),
        "MCP": json.dumps(get_approval_status(approver, conversation_id=conversation_id, detail="full")),
        "admin page": browser.get(f"/admin/approvals/pendingapproval/{pause.pk}/change/").content.decode(),
    }
    assert REFERENCE in shown["approver's approval-status"]  # shown by name
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    (received,) = echo_target.requests_to("/t/")
    assert json.loads(received.body)["k"] == secret  # really sent
    assert received.header("X-K") == (secret if secret.isascii() else None)
    forms = wire_forms(received, secret)
    shown["database"] = stored_rows_text(conversation_id)
    shown["the model's requests"] = json.dumps(chat_stub.requests)
    shown["owner's snapshot"] = alice_client.get(f"/agents/{conversation_id}").content.decode()
    assert_in_none(forms, shown)
    for form in forms:
        assert_canary_in_no_record(every_logger_at_debug, form)


@pytest.mark.parametrize("secret", ODD_VALUES, ids=IDS)
def test_a_secret_in_a_rule_fired_call_reaches_the_target_and_no_output_or_record(
    echo_target: EchoTarget, secret
):
    set_secret(name="odd", value=secret)
    task = {
        "id": "api",
        "type": "httpcalls",
        "targetServerUrl": echo_target.url,
        "calls": [{"name": "pay", "actions": ["pay"], "request": request_with(secret)}],
    }
    memory = ConversationMemory(
        "c1", current=Step(input="x", actions=["pay"]), caller=Caller("alice", given_token="")
    )
    httpcalls.run(task, memory, TurnContext({}, "c1"))
    (received,) = echo_target.requests_to("/t/")
    assert json.loads(received.body)["k"] == secret
    kept = json.dumps({"outputs": memory.current.outputs, "data": memory.current.data}, ensure_ascii=False)
    assert REFERENCE in kept  # the record of what was sent names it
    assert_in_none(wire_forms(received, secret), {"step outputs and data": kept})


def test_a_secret_that_would_be_cut_in_a_url_is_refused(db):
    set_secret(name="cut", value="abc?def#ghi")
    for task, path in (
        ({"targetServerUrl": "http://x"}, "/t/${vault:cut}"),
        ({"targetServerUrl": "http://x/${vault:cut}"}, "/t"),
    ):
        with pytest.raises(SecretReferenceError, match=r"\$\{vault:cut\} holds '\?' or '#'"):
            build_request(task, {"request": {"path": path}}, {}, caller_token=None)
    built = build_request(
        {"targetServerUrl": "http://x"},
        {"request": {"path": "/t?k=${vault:cut}", "queryParams": {"j": "${vault:cut}"}}},
        {},
        caller_token=None,
    )
    assert built.target()[1] == [("k", "abc?def#ghi"), ("j", "abc?def#ghi")]  # a query value: kept whole
