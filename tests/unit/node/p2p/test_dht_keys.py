"""Issue 15: capability provider keys are in the standard form any kad-dht server accepts."""

from __future__ import annotations

import hashlib

import cid
import pytest

from node.p2p.dht import capability_cid, capability_dht_key
from protocol import ComputeUnit

PINNED = [
    # The exact bytes on the wire: multihash sha2-256 (0x12 0x20) + sha256 of the capability string.
    (None, "12201c99ab5c776c87a02adce886b31dd9c5d014d2bb15535eeb0d218cab01e57669"),
    (ComputeUnit.CPU_ONNX, "122073ab400cfe1f23990b00f01d82d7cc6f515cf7181e16d29a635e4c534e0cb085"),
]


@pytest.mark.parametrize(("unit", "hex_key"), PINNED)
def test_provider_key_bytes_are_pinned(unit: ComputeUnit | None, hex_key: str) -> None:
    assert capability_dht_key(unit).hex() == hex_key


@pytest.mark.parametrize("unit", [None, *ComputeUnit])
def test_provider_key_is_the_multihash_of_the_capability_string(unit: ComputeUnit | None) -> None:
    text = "sark/cap/v1/any" if unit is None else f"sark/cap/v1/{unit.value}"
    key = capability_dht_key(unit)
    assert key == b"\x12\x20" + hashlib.sha256(text.encode()).digest()
    assert len(key) == 34


@pytest.mark.parametrize("unit", [None, *ComputeUnit])
def test_cid_is_v1_raw_and_carries_the_provider_key(unit: ComputeUnit | None) -> None:
    parsed = cid.make_cid(capability_cid(unit))  # an independent CID parser (py-cid, a libp2p dependency)
    assert parsed.version == 1
    assert parsed.codec == "raw"
    assert parsed.multihash == capability_dht_key(unit)
