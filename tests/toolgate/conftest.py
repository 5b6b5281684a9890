"""Fixtures for toolgate tests: real servers on loopback (an HTTP recorder and a Chat Completions stub)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harnesses.chat_stub import ChatStub, running_chat_stub
from harnesses.echo_target import EchoTarget, running_echo_target

# the recorder of the pipeline tests: a ThreadingHTTPServer on loopback answering every method and path
from tests.conversations.conftest import LoopbackServer, loopback_server

__all__ = ["ChatStub", "LoopbackServer", "chat_stub", "loopback_server"]


@pytest.fixture
def chat_stub() -> Iterator[ChatStub]:
    with running_chat_stub() as stub:
        yield stub


@pytest.fixture
def echo_target() -> Iterator[EchoTarget]:
    """A target that records every request byte for byte and echoes it back (harnesses/echo_target.py)."""
    with running_echo_target() as target:
        yield target
