"""Settlement listeners and their probes (approvals.settlements): a listener that registered a probe is
handed the answer the settling statement gave, and asks for itself whenever there is none."""

from __future__ import annotations

import pytest

from approvals import settlements
from approvals.models import Pause


@pytest.fixture
def listeners(monkeypatch):
    monkeypatch.setattr(settlements, "_LISTENERS", [])
    monkeypatch.setattr(settlements, "_PROBES", {})
    heard: list[tuple[str, object]] = []

    def plain(pause):
        heard.append(("plain", None))

    def probing(pause, probed=None):
        heard.append(("probing", probed))

    def other(pause, probed=None):
        heard.append(("other", probed))

    settlements.register_settlement_listener(probing, probe="true")
    settlements.register_settlement_listener(plain)
    settlements.register_settlement_listener(other, probe="false")
    return heard


def test_the_probes_are_listed_in_the_order_their_listeners_registered(listeners):
    assert settlements.settlement_probes() == ("true", "false")


def test_a_listener_with_a_probe_is_handed_its_answer(listeners):
    settlements.announce_settled(Pause(), [True, False])
    assert listeners == [("probing", True), ("plain", None), ("other", False)]


@pytest.mark.parametrize("probed", [None, [], [True]], ids=["not asked", "no answers", "too few"])
def test_a_listener_whose_probe_got_no_answer_asks_for_itself(listeners, probed):
    settlements.announce_settled(Pause(), probed)
    assert listeners == [("probing", None), ("plain", None), ("other", None)]
