"""Issue 15: an empty lookup is explained by what the DHT servers said (reason codes, not silence)."""

from __future__ import annotations

import pytest

from node.p2p.kad import ProviderLookup
from node.p2p.survey import NoWorkers, shortfall

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
