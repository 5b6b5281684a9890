"""Property: a value of a credential's shape that the model wrote survives in no view of a pause but the
reviewer's decision views, which show it as it will be sent, with a warning naming where it is."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import Pause, PauseStatus
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, say, start

pytestmark = pytest.mark.django_db

TOKEN_CHARS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=24, max_size=40
).filter(lambda t: len(set(t)) >= 8)  # not hex-like runs such as hash zeros
SECRETS = st.one_of(
    TOKEN_CHARS.map(lambda t: f"sk-{t}"),
    TOKEN_CHARS.map(lambda t: f"sk-ant-{t}"),
    TOKEN_CHARS.map(lambda t: f"Bearer {t}"),
)
PLACES = st.sampled_from(["to", "memo", "api_key", "password"])


def _reviewer_views(client, admin_user, conversation_id: str, pause: Pause) -> list[str]:
    from django.test import Client

    browser = Client()
    browser.force_login(admin_user)
    decision_page = browser.get(f"/admin/approvals/pendingapproval/{pause.pk}/change/")
    assert decision_page.status_code == 200
    return [
        decision_page.content.decode(),
        client.get(f"/agents/{conversation_id}/approval-status").content.decode(),
        client.get(f"/agents/{conversation_id}/approval-status?detail=full").content.decode(),
    ]


def _other_views(
    owner_client, approver_client, admin_client, conversation_id: str, pause: Pause
) -> list[str]:
    return [
        owner_client.get(f"/agents/{conversation_id}/approval-status").content.decode(),
        owner_client.get(f"/agents/{conversation_id}").content.decode(),
        approver_client.get("/agents/pending-approvals").content.decode(),
        admin_client.get(f"/audit/entries?conversation={conversation_id}").content.decode(),
        pause.reason,
    ]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=SECRETS, place=PLACES)
def test_a_credential_shaped_model_value_is_shown_only_to_the_reviewer_with_a_warning(
    alice_client, approver_client, admin_client, admin_user, http_recorder, secret, place
):
    arguments = {"amount": 1, "to": "bob", place: secret}
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "c1", "name": "transfer_funds", "arguments": arguments}],
        },
    ]
    document = payments_agent(
        http_recorder.url,
        script=script,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "pauseReason": "Approve {toolNames} for " + secret,
        },
    )
    calls = document["workflows"][0]["tasks"][1]["calls"][0]
    calls["request"]["body"] = {"amount": "{args.amount}", "to": "{args.to}", "note": "{args." + place + "}"}
    calls["request"]["headers"] = {"X-Client-Auth": "{args." + place + "}"}
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "transfer now").json()["state"] == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    secret_part = secret.split()[-1].removeprefix("sk-ant-").removeprefix("sk-")
    for text in _other_views(alice_client, approver_client, admin_client, conversation_id, pause):
        assert secret_part not in text, text[:500]
    reviewer = _reviewer_views(approver_client, admin_user, conversation_id, pause)
    for text in reviewer:
        assert secret_part in text, text[:500]
    (call,) = json.loads(reviewer[1])["pauseDetails"]["calls"]
    warned = {warning["field"] for warning in call["warnings"]}
    assert {f"arguments.{place}", "request.headers.x-client-auth", "request.body"} <= warned
    assert "hitl-credential-warning" in reviewer[0]
