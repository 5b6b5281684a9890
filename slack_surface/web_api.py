"""Calls of the Slack Web API, always through slack_sdk's WebClient at ``HITL_SLACK_API_URL``.

No call is made without a bot token the integration names and the secret store holds; the token is
read for the call and never logged (slack_sdk's own logger does not print it either).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from slack_sdk import WebClient

from slack_surface.integrations import resolved
from slack_surface.models import SlackIntegration

TIMEOUT_SECONDS = 10


def client_for(integration: SlackIntegration) -> WebClient:
    base_url = settings.HITL_SLACK_API_URL
    if not base_url.endswith("/"):
        base_url += "/"
    return WebClient(token=resolved(integration.bot_token_ref), base_url=base_url, timeout=TIMEOUT_SECONDS)


def post_message(
    integration: SlackIntegration,
    *,
    channel: str,
    text: str,
    thread_ts: str | None = None,
    blocks: list[dict[str, Any]] | None = None,
) -> str:
    """``chat.postMessage``; returns the message's ts. Raises SlackApiError / a connection error on failure."""
    kwargs: dict[str, Any] = {"channel": channel, "text": text}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if blocks is not None:
        kwargs["blocks"] = blocks
    response = client_for(integration).chat_postMessage(**kwargs)
    return str(response.get("ts") or "")


def update_message(
    integration: SlackIntegration, *, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]
) -> None:
    client_for(integration).chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
