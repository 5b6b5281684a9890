"""A local fake of the Slack Web API (a real loopback HTTP server), requests signed by slack_sdk, and a
configured integration of the account bot."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from harnesses.factories import account_bot, deployed_agent
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import make_user
from toolgate.outbound.secret_store import set_secret

SIGNING_SECRET = "slack-signing-secret-for-tests"
BOT_TOKEN = "xoxb-test-bot-token"
APPROVAL_CHANNEL = "CAPPROVALS"


class FakeSlack:
    """Records every Web API call (method, JSON or form arguments, token) and answers ok with a fresh ts;
    ``fail_next`` answers the next calls ``{"ok": false}`` (a refusal slack_sdk raises on); ``delay``
    seconds before each answer make it a slow Web API."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_next = 0
        self.delay = 0.0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                try:
                    args = json.loads(raw) if raw.startswith("{") else dict(_form(raw))
                except ValueError:
                    args = {"raw": raw}
                with fake._lock:
                    failing = fake.fail_next > 0
                    fake.fail_next -= 1 if failing else 0
                    fake.calls.append(
                        {
                            "method": self.path.strip("/").split("?")[0],
                            "args": args,
                            "token": self.headers.get("Authorization", ""),
                            "failed": failing,
                        }
                    )
                    ts = f"{time.time():.6f}"
                time.sleep(fake.delay)
                body = {"ok": False, "error": "channel_not_found"} if failing else {"ok": True, "ts": ts}
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The chat.postMessage arguments that Slack accepted, optionally to one channel."""
        return [
            c["args"]
            for c in self.calls
            if c["method"] == "chat.postMessage"
            and not c["failed"]
            and channel in (None, c["args"].get("channel"))
        ]

    def updates(self) -> list[dict[str, Any]]:
        return [c["args"] for c in self.calls if c["method"] == "chat.update"]


def _form(raw: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(raw)


@pytest.fixture
def fake_slack(settings):
    fake = FakeSlack()
    fake.thread.start()
    settings.HITL_SLACK_API_URL = fake.url
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join(timeout=5)


def signed_headers(body: str, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict[str, str]:
    """The headers Slack sends, signed with slack_sdk's own signing."""
    timestamp = str(int(time.time()) if at is None else at)
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp, "HTTP_X_SLACK_SIGNATURE": signature}


def post_event(client: Any, payload: dict[str, Any], **sign: Any) -> Any:
    body = json.dumps(payload)
    return client.post(
        "/integrations/slack/events",
        data=body,
        content_type="application/json",
        **signed_headers(body, **sign),
    )


def message_event(
    text: str, *, ts: str, thread_ts: str | None = None, user: str = "UASKER", event_id: str | None = None
) -> dict[str, Any]:
    event = {"type": "message", "channel": "CTHREADS", "user": user, "text": text, "ts": ts}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return {"type": "event_callback", "event_id": event_id or f"Ev{ts}", "event": event}


def click_body(
    value: str, *, action: str = "hitl_approve", user: str = "UAPPROVER", ts: str = "111.222"
) -> str:
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": APPROVAL_CHANNEL},
        "container": {"type": "message", "channel_id": APPROVAL_CHANNEL, "message_ts": ts},
        "actions": [{"action_id": action, "value": value}],
    }
    return urlencode({"payload": json.dumps(payload)})


def signed_click(client: Any, body: str, **sign: Any) -> Any:
    """A click signed as Slack signs it, and the service's answer (nothing queued is run)."""
    return client.post(
        "/integrations/slack/interactive",
        data=body,
        content_type="application/x-www-form-urlencoded",
        **signed_headers(body, **sign),
    )


def post_click(client: Any, body: str, **sign: Any) -> Any:
    """A signed click, answered; then what the q-cluster does after the answer (the card's update or a
    notice to the channel), so the test reads the channel as Slack shows it a moment later."""
    answer = signed_click(client, body, **sign)
    answer_in_slack()
    return answer


def answer_in_slack() -> int:
    """Run the queued answers of clicks (``answer_in_slack`` tasks), as the q-cluster would."""
    from slack_surface.interactions import ANSWER_TASK

    return run_queued_tasks(only=ANSWER_TASK)


@pytest.fixture
def integration(db, fake_slack):
    """The account bot wired to Slack: approvals channel, UAPPROVER and UOTHER allowed to decide."""
    from slack_surface.integrations import IntegrationInput, create_integration

    set_secret(name="slack.signing", value=SIGNING_SECRET)
    set_secret(name="slack.bot", value=BOT_TOKEN)
    owner = make_user("slackbot", "admin")
    agent_id = deployed_agent(account_bot())
    created = create_integration(
        name="acme",
        data=IntegrationInput(
            agent_id=agent_id,
            environment="production",
            conversation_owner=None,
            signing_secret="${vault:slack.signing}",
            bot_token="${vault:slack.bot}",
            approval_channel=APPROVAL_CHANNEL,
            approver_user_ids=" UAPPROVER, UOTHER ,,",
        ),
        creator=owner,
    )
    return SimpleNamespace(row=created, agent_id=agent_id, owner=owner)
