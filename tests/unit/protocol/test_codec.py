"""The msgpack codec: round trips of every kind, canonical bodies, and refusal of bad input."""

from __future__ import annotations

import enum
from typing import Any

import msgpack  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kit.wire_strategies import ALL_KINDS, BODIES, MESSAGES

from protocol import (
    BlobChunk,
    BlobMeta,
    ComputeUnit,
    Decline,
    DeclineReason,
    LocalProtocolError,
    RemoteProtocolError,
    TaskSpec,
    codec,
    decode,
    encode,
    pack_body,
    unpack_body,
)
from protocol.codec import MAX_ARRAY_LEN, MAX_STR_LEN

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)


def test_every_message_kind_has_a_strategy() -> None:
    assert set(MESSAGES) == ALL_KINDS


@pytest.mark.parametrize("kind", sorted(MESSAGES))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_round_trip_every_kind(kind: str, data: st.DataObject) -> None:
    message = data.draw(MESSAGES[kind])
    wire = encode(message)
    assert decode(wire) == message
    assert encode(decode(wire)) == wire


@pytest.mark.parametrize("cls", list(BODIES), ids=lambda c: c.__name__)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_round_trip_every_signed_body(cls: type[Any], data: st.DataObject) -> None:
    body = data.draw(BODIES[cls])
    packed = pack_body(body)
    assert unpack_body(packed, cls) == body
    assert pack_body(unpack_body(packed, cls)) == packed


def test_bodies_are_canonical_whatever_the_dict_order() -> None:
    one = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, input_shapes={"a": (1,), "b": (2, 3)})
    two = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, input_shapes={"b": (2, 3), "a": (1,)})
    assert pack_body(one) == pack_body(two)


def test_wire_form_is_plain_msgpack() -> None:
    raw = msgpack.unpackb(encode(Decline(task_id="t", reason=DeclineReason.BUSY)), raw=False)
    assert raw == {"kind": "decline", "task_id": "t", "reason": "busy", "detail": ""}
    assert type(raw["reason"]) is str
    chunk = msgpack.unpackb(encode(BlobChunk(offset=3, data=b"\x00\xff")), raw=False)
    assert chunk["data"] == b"\x00\xff"
    spec = msgpack.unpackb(pack_body(TaskSpec(compute_unit=ComputeUnit.GPU_ONNX, input_shapes={"x": (1, 2)})))
    assert spec["input_shapes"] == {"x": [1, 2]}
    assert spec["compute_unit"] == "GPU (ONNX)"


class Level(enum.IntEnum):
    LOW = 1


def _slow_plain(value: Any) -> Any:
    """The wire form as the codec defines it, one call per value (the codec's own before 2026-11-30)."""
    if isinstance(value, enum.Enum):
        return _slow_plain(value.value)
    if isinstance(value, dict):
        return {str(k): _slow_plain(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_slow_plain(v) for v in value]
    return value


def test_a_containers_leaves_are_encoded_without_a_call_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 samples cost one call, not 10,001; an enum (an `IntEnum`, a subclass of int, too), a
    tuple and an unsorted map inside still take the wire form's way, byte for byte."""
    calls = 0
    plain = codec._plain

    def counted(value: object) -> Any:
        nonlocal calls
        calls += 1
        return plain(value)

    monkeypatch.setattr(codec, "_plain", counted)
    dump = {
        "z": [0.5] * 10_000,
        "a": (Level.LOW, ComputeUnit.CPU_ONNX, None, b"\x00"),
        3: {"y": 1, "x": True},
    }
    assert msgpack.packb(codec._plain(dump)) == msgpack.packb(_slow_plain(dump))
    assert calls == 1 + 3 + 2 * 2  # the map, its three containers, the two enums and their values


def test_an_int_beyond_64_bits_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        encode(BlobMeta(sha256="0" * 64, size=2**64))


def _pack(obj: object) -> bytes:
    data = msgpack.packb(obj, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


BUSY = {"kind": "busy", "detail": ""}

BAD_INPUTS: dict[str, bytes] = {
    "empty": b"",
    "truncated": _pack(BUSY)[:-1],
    "trailing bytes": _pack(BUSY) + b"\x00",
    "not a map": _pack([1, 2, 3]),
    "nil": _pack(None),
    "unknown kind": _pack({"kind": "nope"}),
    "kind not a string": _pack({"kind": 7}),
    "kind unhashable": _pack({"kind": []}),
    "no kind": _pack({"detail": ""}),
    "extra field": _pack({**BUSY, "extra": 1}),
    "wrong field type": _pack({"kind": "blob_chunk", "offset": "zero", "data": b""}),
    "negative offset": _pack({"kind": "blob_chunk", "offset": -1, "data": b""}),
    "bad task id": _pack({"kind": "dispatch", "task_id": "a b", "lease_id": "l"}),
    "bad enum value": _pack({"kind": "decline", "task_id": "t", "reason": "bored"}),
    "int map key": b"\x81\x01\xa1x",
    "ext type": b"\xd4\x05\x00",
    "zero-length ext": b"\xc7\x00\x05",
    "timestamp ext": b"\xd6\xff\x00\x00\x00\x01",
    "reserved byte": b"\xc1",
    "string too long": _pack({"kind": "busy", "detail": "x" * (MAX_STR_LEN + 1)}),
    "array longer than input": b"\xdd\xff\xff\xff\xff",
    "map longer than input": b"\xdf\xff\xff\xff\xff",
    "bin longer than input": b"\xc6\xff\xff\xff\xff",
    "array over the cap": b"\xdd" + (MAX_ARRAY_LEN + 1).to_bytes(4, "big") + b"\xc0" * (MAX_ARRAY_LEN + 1),
    "deep nesting": b"\x91" * 100_000 + b"\xc0",
    "invalid utf-8": b"\x81\xa4kind\xa2\xff\xfe",
}


@pytest.mark.parametrize("data", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_bad_input_is_only_ever_a_remote_error(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        decode(data)
    with pytest.raises(RemoteProtocolError):
        unpack_body(data, TaskSpec)


def test_unpack_body_checks_the_type() -> None:
    with pytest.raises(RemoteProtocolError):
        unpack_body(pack_body(BlobMeta(sha256="0" * 64, size=1)), TaskSpec)
