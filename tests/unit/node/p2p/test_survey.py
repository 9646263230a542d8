"""Issue 15: an empty lookup is explained by what the DHT servers said (reason codes, not silence)."""

from __future__ import annotations

import pytest

from node.p2p.kad import ProviderLookup
from node.p2p.node import Look
from node.p2p.survey import NoWorkers, explain, shortfall

CASES = [
    (ProviderLookup({}, 0, {"gateA": "StreamReset: Invalid CID"}), NoWorkers.GATE_REFUSED),
    (ProviderLookup({}, 1, {}), NoWorkers.NO_PROVIDER),
    (ProviderLookup({}, 1, {"gateB": "timed out"}), NoWorkers.NO_PROVIDER),  # one server answered
    (ProviderLookup({}, 0, {}), NoWorkers.NO_PROVIDER),
    (ProviderLookup({"w1": ["/ip4/127.0.0.1/tcp/1"]}, 1, {}), NoWorkers.NO_ANSWER),
]


@pytest.mark.parametrize(("lookup", "code"), CASES)
def test_shortfall_reason(lookup: ProviderLookup, code: NoWorkers) -> None:
    assert shortfall(lookup, "CPU (ONNX)").code is code


def test_a_refusal_names_the_server_and_its_reason() -> None:
    why = shortfall(ProviderLookup({}, 0, {"gateA": "StreamReset: Invalid CID"}), "any unit")
    assert "gateA" in why.detail
    assert "Invalid CID" in why.detail


def _look(lookup: ProviderLookup | None, *, ended: bool = True) -> Look:
    return Look(peers=[], lookup=lookup, ended=ended, timeout_s=5.0)


def test_an_empty_look_is_explained_by_its_own_lookup_not_a_later_one() -> None:
    # `peers` found nobody because its lookup met no provider (records lapsed at that moment): said
    # so, whatever a second lookup a moment later would find (it said "none answered" of providers
    # that nobody had asked)
    why = explain(_look(ProviderLookup({}, 1, {})), "any unit")
    assert why.code is NoWorkers.NO_PROVIDER
    assert "1 DHT server(s) answered with no provider" in why.detail


def test_a_look_cut_by_its_deadline_says_so_with_the_deadline() -> None:
    why = explain(_look(None, ended=False), "any unit")
    assert why.code is NoWorkers.TIMED_OUT
    assert "within 5 s (--timeout)" in why.detail
    listed = ProviderLookup({"w1": ["/ip4/127.0.0.1/tcp/1"]}, 1, {})
    cut = explain(_look(listed, ended=False), "any unit")
    assert cut.code is NoWorkers.NO_ANSWER
    assert cut.detail.endswith("none answered /sark/profile with a valid advert within 5 s (--timeout)")
    assert explain(_look(listed), "any unit").detail.endswith("with a valid advert")
