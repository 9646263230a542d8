"""Fuzzing the wire decoder: random and mutated frames must only ever raise RemoteProtocolError."""

from __future__ import annotations

import contextlib
import functools
import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgpack  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    Conversation,
    FrameDecoder,
    RemoteProtocolError,
    Role,
    decode,
    encode,
    frame,
)
from protocol import messages as m
from protocol.base import Value
from protocol.codec import MAX_BIN_LEN
from protocol.framing import encode_varint
from protocol.values import Load

SEED = 20261122
CASES_PER_MODE = 4_000
ENVELOPE = m.Envelope(peer_id="12D3KooW", public_key=b"k" * 32, payload=b"\x80", signature=b"s" * 64)
CORPUS: tuple[Value, ...] = (
    m.Offer(task_id="t-1", envelope=ENVELOPE),
    m.Commit(task_id="t-1", lease_id="l-1", lease_ttl_s=5.0, queue_position=2),
    m.Decline(task_id="t-1", reason=m.DeclineReason.NOT_ENOUGH_MEMORY, detail="needs 8 GiB"),
    m.Dispatch(task_id="t-1", lease_id="l-1"),
    m.Progress(task_id="t-1", lease_id="l-1", phase=m.Phase.MEASURING, done=3, total=10, median_ms=1.5),
    m.Result(task_id="t-1", lease_id="l-1", envelope=ENVELOPE),
    m.Failure(task_id="t-1", lease_id="l-1", reason=m.FailureReason.TIMEOUT, detail="600 s"),
    m.Ack(task_id="t-1", lease_id="l-1"),
    m.Cancel(task_id="t-1", lease_id=None, envelope=ENVELOPE),
    m.Reclaim(task_id="t-1", lease_id="l-1"),
    m.BlobGet(sha256="a" * 64, offset=10, length=1 << 20),
    m.BlobMeta(sha256="b" * 64, size=123456),
    m.BlobChunk(offset=0, data=bytes(range(256))),
    m.BlobEnd(),
    m.BlobMissing(sha256="c" * 64, detail="gone"),
    m.ProfileGet(),
    m.ProfileReply(advert=ENVELOPE, load=Load(running=1, queued=2)),
    m.ReachGet(addrs=("/ip4/127.0.0.1/tcp/4001",)),
    m.ReachReply(reachable=True, addr="/ip4/127.0.0.1/tcp/4001"),
    m.ClockGet(round=0),
    m.ClockReply(round=0, now=1.7e9),
    m.Busy(detail="4 in flight"),
)
VALID: tuple[bytes, ...] = tuple(encode(msg) for msg in CORPUS)  # type: ignore[arg-type,unused-ignore]
ODD_VALUES: tuple[object, ...] = (
    None, True, 0, -1, 2**63 - 1, 2**64 - 1, -(2**63), 1.5, math.inf, math.nan, "", "x" * 300, "\u2603",
    b"", b"\xff" * 40, [], [1, "a"], {}, {"kind": "busy"}, {"a": {"b": []}},
)  # fmt: skip


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """One random mutation of a valid encoding: flip, overwrite, truncate, splice, insert, delete, repeat."""
    buf = bytearray(data)
    op = rng.randrange(8)
    pos = rng.randrange(len(buf) + 1)
    if op == 0 and buf:
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif op == 1 and buf:
        buf[pos % len(buf)] = rng.choice(
            (0x00, 0x7F, 0x80, 0xC1, 0xC7, 0xD4, 0xDD, 0xDF, 0xFF, rng.randrange(256))
        )
    elif op == 2:
        del buf[pos:]
    elif op == 3:
        other = rng.choice(VALID)
        buf = buf[:pos] + other[rng.randrange(len(other) + 1) :]
    elif op == 4:
        buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
    elif op == 5:
        del buf[pos : pos + rng.randint(1, 16)]
    elif op == 6:
        buf[pos:pos] = buf[pos : pos + rng.randint(1, 32)] * rng.randint(2, 50)
    else:
        buf = bytearray(rng.randbytes(rng.randint(0, 200)))
    return bytes(buf)


def _mutate_fields(rng: random.Random, data: bytes) -> bytes:
    """A well-formed msgpack map whose fields got odd values, or were dropped, added or renamed."""
    tree: dict[str, Any] = msgpack.unpackb(data, raw=False)
    keys = list(tree)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        if op == 0:
            tree[rng.choice(keys)] = rng.choice(ODD_VALUES)
        elif op == 1:
            tree.pop(rng.choice(keys), None)
        elif op == 2:
            tree[rng.choice(("x", "kind", "lease_id", "envelope"))] = rng.choice(ODD_VALUES)
        else:
            tree["kind"] = rng.choice(("offer", "blob_chunk", "profile", "busy", "", "Offer"))
    packed = msgpack.packb(tree, use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


def _run(case: Callable[[], int], label: str, counts: Counter[str]) -> None:
    """Run one case; RemoteProtocolError is the one allowed failure, anything else fails the test."""
    try:
        counts[f"decoded {case()}"] += 1
    except RemoteProtocolError:
        counts["refused"] += 1
    except Exception as exc:  # the property under test: nothing but RemoteProtocolError
        pytest.fail(f"{label} raised {type(exc).__name__}: {exc!r} (seed {SEED})")


def _decode_stream(stream: bytes, chunk: int) -> int:
    """Feed a byte stream in chunks to a FrameDecoder; decode every whole frame. Returns frames decoded."""
    decoder = FrameDecoder(max_frame=MAX_BIN_LEN)
    frames = 0
    for start in range(0, len(stream), chunk):
        decoder.feed(stream[start : start + chunk])
        while (payload := decoder.next_frame()) is not None:
            decode(payload)
            frames += 1
    return frames


def test_ten_thousand_random_and_mutated_frames_raise_only_remote_errors() -> None:
    rng = random.Random(SEED)
    counts: Counter[str] = Counter()
    for i in range(CASES_PER_MODE):
        payload = _mutate(rng, rng.choice(VALID))
        _run(
            functools.partial(_decode_stream, frame(payload), 1 << 20),
            f"payload case {i} {payload!r}",
            counts,
        )
    for i in range(CASES_PER_MODE):
        stream = _mutate(rng, b"".join(frame(v) for v in rng.sample(VALID, 3)))
        chunk = rng.randint(1, 64)
        _run(functools.partial(_decode_stream, stream, chunk), f"stream case {i} {stream!r}", counts)
    for i in range(CASES_PER_MODE):
        payload = _mutate_fields(rng, rng.choice(VALID))
        _run(
            functools.partial(_decode_stream, frame(payload), 1 << 20), f"field case {i} {payload!r}", counts
        )
    assert counts.total() == 3 * CASES_PER_MODE >= 10_000
    assert counts["refused"] > CASES_PER_MODE  # the fuzzer really hits the error paths ...
    assert counts["decoded 1"] > 0  # ... and some mutations still decode (e.g. a changed detail text)


def test_mutated_streams_into_a_conversation_raise_only_remote_errors() -> None:
    rng = random.Random(SEED + 1)
    counts: Counter[str] = Counter()
    commit = encode(m.Commit(task_id="t-1", lease_id="l-1", lease_ttl_s=5.0))
    progress = encode(m.Progress(task_id="t-1", lease_id="l-1", phase=m.Phase.QUEUED))

    def feed(stream: bytes) -> int:
        conversation = Conversation(Role.SUBMITTER, "t-1")
        conversation.send(m.Offer(task_id="t-1", envelope=ENVELOPE), now=0.0)
        conversation.receive_data(stream)
        events = 0
        while conversation.next_event(now=1.0) is not None:
            events += 1
        return events

    for i in range(1_000):
        stream = _mutate(rng, frame(commit) + frame(progress))
        _run(functools.partial(feed, stream), f"conversation case {i} {stream!r}", counts)
    assert counts["refused"] > 100


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_remote_errors(data: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode(data)


msgpack_trees = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.sampled_from(["kind", "offer", "busy", "task_id", "lease_id", "envelope", "profile"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=10) | st.sampled_from(["kind", "task_id", "detail"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    tree=msgpack_trees,
    kind=st.none() | st.sampled_from(sorted({str(msgpack.unpackb(v)["kind"]) for v in VALID})),
)
def test_well_formed_msgpack_of_any_shape_raises_only_remote_errors(tree: object, kind: str | None) -> None:
    if kind is not None and isinstance(tree, dict):
        tree["kind"] = kind
    with contextlib.suppress(RemoteProtocolError):
        decode(msgpack.packb(tree, use_bin_type=True))


def test_the_decoder_refuses_a_huge_header_inside_a_fuzzed_stream() -> None:
    assert _decode_stream(frame(VALID[0]), 7) == 1
    with pytest.raises(RemoteProtocolError):
        _decode_stream(frame(VALID[0]) + encode_varint(4 << 30), 7)
