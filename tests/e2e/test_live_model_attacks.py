"""M1 over real HTTP (docs/reliability.md): the catalogue of harnesses/model_attacks.py against a live uvicorn
process, the owner and the reviewer speaking to it with httpx, the model the openai client against the
Chat Completions stub, the egress guard on in the server as in production; the server's own log files
are searched for the secret."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnesses.chat_stub import running_chat_stub
from harnesses.echo_target import running_echo_target
from harnesses.live_stack import LiveStack, api_user, running_stack
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
from toolgate.outbound.secret_store import set_secret

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(
        django_db_blocker,
        tmp_path_factory.mktemp("m1-stack"),
        qclusters=False,
        HITL_HTTP_DENY_PRIVATE="true",
        HITL_HTTP_ALLOW_PRIVATE="127.0.0.1",
    )


class Speaker:
    """A REST client of the live server with the interface the harness drives (``get``, ``post``)."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=60)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def post(self, path: str, data: Any = None, format: str = "json") -> httpx.Response:  # DRF's name
        return self.http.post(path, json=data)


def server_logs(log_dir: Path) -> str:
    return "\n".join(path.read_text(errors="replace") for path in sorted(log_dir.glob("*.log")))


def test_the_model_cannot_widen_its_approval_over_http(live_stack: LiveStack) -> None:
    set_secret(name=VAULT_NAME, value=SECRET)
    owner = Speaker(live_stack.base_url, api_user("alice"))
    approver_token = api_user("approver", "approver")
    with (
        running_chat_stub() as stub,
        running_echo_target() as main,
        running_echo_target() as internal,
        running_echo_target(PRIVATE_HOST) as private,
    ):
        targets = Targets(main, internal, private)
        provider = {"type": "openai", "baseUrl": f"{stub.url}/v1", "apiKey": "sk-none", "model": "m1"}
        world = World(
            targets=targets,
            stub=stub,
            owner=owner,
            reviewer=Speaker(live_stack.base_url, approver_token),
            approver_token=approver_token,
            openai_agent=deployed(agent_document(targets, provider)),
            rng=random.Random(16),
        )
        run_attacks(world, random_rounds=2, scripted=False, log_text=lambda: server_logs(live_stack.log_dir))
