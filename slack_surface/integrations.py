"""Slack integrations: their store (admins only) and the secrets they name.

An integration wires one Slack app to one agent or to one group (exactly one: ``agentId`` or ``groupId``;
a thread of a group integration's channel starts group discussions, slack_surface.discussion_threads). Its signing secret and bot token are ``${vault:NAME}``
references to the secret store (docs/secrets.md): a raw value is refused, so no secret ever sits in
this table, in a response or in a log line; the value is read only when a request is verified or a
message is sent. Conversations started from Slack belong to ``run_as`` (``conversationOwner``), and a
decision from Slack is checked with that user's access, narrowed to the allow-listed Slack users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from common.errors import BadRequest, NotFound
from conversations.models import Agent
from groups.models import Group
from slack_surface.models import SlackIntegration
from toolgate.outbound import SecretStoreUnavailable, UnknownSecret, secret_value

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
VAULT_REFERENCE = re.compile(r"\$\{vault:(?P<name>[A-Za-z0-9_.-]{1,128})\}")
ENVIRONMENTS = ("production", "test")


class SecretUnavailable(Exception):
    """A referenced secret is missing or the store cannot decrypt: named by reference, never by value."""


def approver_ids(integration: SlackIntegration) -> set[str]:
    """``hitlApproverUserIds``: comma-separated, trimmed, empties dropped; unset means nobody (fail closed)."""
    return {part.strip() for part in integration.approver_user_ids.split(",") if part.strip()}


def resolved(reference: str) -> str:
    """The value behind a ``${vault:NAME}`` reference (SecretUnavailable naming the reference otherwise)."""
    match = VAULT_REFERENCE.fullmatch(reference or "")
    if match is None:
        raise SecretUnavailable(f"not a ${{vault:NAME}} reference: {reference!r}")
    try:
        return secret_value(match.group("name"))
    except (UnknownSecret, SecretStoreUnavailable):
        raise SecretUnavailable(f"unknown or unreadable secret {reference}") from None


def integration_named(name: str) -> SlackIntegration | None:
    return SlackIntegration.objects.select_related("agent", "group", "run_as").filter(name=name).first()


def every_integration() -> list[SlackIntegration]:
    return list(SlackIntegration.objects.select_related("agent", "group", "run_as").order_by("name"))


@dataclass(frozen=True)
class IntegrationInput:
    agent_id: Any
    environment: str
    conversation_owner: str | None
    signing_secret: str
    bot_token: str
    approval_channel: str
    approver_user_ids: str
    group_id: Any = None


def _field_error(field: str, message: str) -> BadRequest:
    return BadRequest(f"{field}: {message}", errors=[{"field": field, "message": message}])


def _checked(data: IntegrationInput, *, creator: Any) -> dict[str, Any]:
    """The row's values, every field checked (400 naming the first bad one)."""
    if (data.agent_id is None) == (data.group_id is None):
        field = "groupId" if data.agent_id is not None else "agentId"
        raise _field_error(field, "give exactly one of agentId (conversations) or groupId (discussions)")
    agent = group = None
    if data.agent_id is not None:
        agent = Agent.objects.filter(pk=data.agent_id, deleted_at__isnull=True).first()
        if agent is None:
            raise _field_error("agentId", "no such agent")
    else:
        group = Group.objects.filter(pk=data.group_id, deleted_at__isnull=True).first()
        if group is None:
            raise _field_error("groupId", "no such group")
    if data.environment not in ENVIRONMENTS:
        raise _field_error("environment", "must be production or test")
    for field, value in (("signingSecret", data.signing_secret), ("botToken", data.bot_token)):
        if not VAULT_REFERENCE.fullmatch(value):
            raise _field_error(
                field, "must be a ${vault:NAME} reference to the secret store, never the value"
            )
    owner = creator
    if data.conversation_owner:
        owner = get_user_model().objects.filter(username=data.conversation_owner, is_active=True).first()
        if owner is None:
            raise _field_error("conversationOwner", "no such active user")
    return {
        "agent": agent,
        "group": group,
        "environment": data.environment,
        "run_as": owner,
        "signing_secret_ref": data.signing_secret,
        "bot_token_ref": data.bot_token,
        "approval_channel": data.approval_channel.strip(),
        "approver_user_ids": data.approver_user_ids.strip(),
    }


def create_integration(*, name: str, data: IntegrationInput, creator: Any) -> SlackIntegration:
    if not NAME_PATTERN.fullmatch(name or ""):
        raise _field_error("name", "1-64 characters of A-Z a-z 0-9 _ . -")
    values = _checked(data, creator=creator)
    try:
        with transaction.atomic():
            return SlackIntegration.objects.create(name=name, **values)
    except IntegrityError:
        raise _field_error("name", "an integration with this name exists") from None


def update_integration(*, name: str, data: IntegrationInput, creator: Any) -> SlackIntegration:
    integration = integration_named(name)
    if integration is None:
        raise NotFound(f"No Slack integration named '{name}'.")
    for field, value in _checked(data, creator=integration.run_as).items():
        setattr(integration, field, value)
    integration.save()
    return integration


def delete_integration(*, name: str) -> None:
    deleted, _ = SlackIntegration.objects.filter(name=name).delete()
    if not deleted:
        raise NotFound(f"No Slack integration named '{name}'.")
