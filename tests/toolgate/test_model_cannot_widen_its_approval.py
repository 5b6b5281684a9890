"""M1, the model cannot widen its approval (docs/reliability.md): the catalogue of harnesses/model_attacks.py
against the invariant, fast size here (every strategy with the openai client over HTTP, the single-response
ones with the scripted provider too, and a few random mixes); the full size is bench/model_attacks.py."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from rest_framework.authtoken.models import Token

from harnesses.echo_target import running_echo_target
from harnesses.model_attacks import (
    PRIVATE_HOST,
    SECRET,
    VAULT_NAME,
    Targets,
    World,
    agent_document,
    deployed,
    run_attacks,
)
from tests.toolgate.test_no_secret_in_logs import every_logger_at_debug
from toolgate.secret_store import set_secret

__all__ = ["every_logger_at_debug"]  # the fixture, imported to be used here

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, chat_stub, alice_client, approver_client, approver) -> Iterator[World]:
    settings.HITL_HTTP_DENY_PRIVATE = True  # as in production, with one internal API allowed
    settings.HITL_HTTP_ALLOW_PRIVATE = "127.0.0.1"
    set_secret(name=VAULT_NAME, value=SECRET)
    with (
        running_echo_target() as main,
        running_echo_target() as internal,
        running_echo_target(PRIVATE_HOST) as private,
    ):
        targets = Targets(main, internal, private)
        provider = {"type": "openai", "baseUrl": f"{chat_stub.url}/v1", "apiKey": "sk-none", "model": "m1"}
        yield World(
            targets=targets,
            stub=chat_stub,
            owner=alice_client,
            reviewer=approver_client,
            approver_token=Token.objects.get(user=approver).key,
            openai_agent=deployed(agent_document(targets, provider)),
            rng=random.Random(int(os.environ.get("HITL_M1_SEED", "26"))),
        )


def test_the_model_cannot_widen_its_approval(world, every_logger_at_debug):
    run_attacks(world, random_rounds=4, log_text=lambda: every_logger_at_debug.text)


@pytest.mark.fullsize
def test_full_size_model_attacks(world):
    run_attacks(world, random_rounds=int(os.environ.get("HITL_M1_ROUNDS", "200")), log_text=lambda: "")
