"""Varint framing: incremental decoding, the frame cap, and a 4 GiB header refused without allocating."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import MAX_FRAME, FrameDecoder, LocalProtocolError, RemoteProtocolError, frame
from protocol.framing import encode_varint


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16384, b"\x80\x80\x01"),
    ],
)
def test_varint_is_unsigned_leb128(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded


@pytest.mark.parametrize("value", [-1, 2**64])
def test_varint_out_of_range_is_a_local_error(value: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_varint(value)


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
)
def test_frames_survive_any_split_of_the_stream(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in itertools.pairwise(bounds):
        decoder.feed(stream[start:end])
        while (payload := decoder.next_frame()) is not None:
            out.append(payload)
    assert out == payloads
    assert decoder.buffered == 0


def test_a_partial_frame_waits_for_more_bytes() -> None:
    decoder = FrameDecoder()
    data = frame(b"hello")
    decoder.feed(data[:3])
    assert decoder.next_frame() is None
    assert decoder.buffered == 3
    decoder.feed(data[3:] + frame(b""))
    assert decoder.next_frame() == b"hello"
    assert decoder.next_frame() == b""
    assert decoder.next_frame() is None


def test_frame_at_the_cap_passes_and_one_byte_more_is_refused() -> None:
    decoder = FrameDecoder(max_frame=1000)
    decoder.feed(frame(b"x" * 1000))
    assert decoder.next_frame() == b"x" * 1000
    decoder.feed(encode_varint(1001))
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_a_broken_stream_stays_broken() -> None:
    decoder = FrameDecoder(max_frame=10)
    decoder.feed(encode_varint(11))
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
    decoder.feed(b"")
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


@pytest.mark.parametrize(
    "header",
    [b"\x80\x00", b"\xff\x80\x00", b"\x80" * 10 + b"\x00", b"\xff" * 11],
    ids=["non-minimal", "non-minimal-2", "eleven-bytes", "endless"],
)
def test_malformed_headers_are_refused(header: bytes) -> None:
    decoder = FrameDecoder(max_frame=2**70)
    decoder.feed(header)
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_default_cap_is_four_mib() -> None:
    assert MAX_FRAME == 4 << 20


def test_a_4_gib_header_is_refused_without_allocating() -> None:
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        decoder.feed(encode_varint(4 << 30) + b"\x00" * 64)
        with pytest.raises(RemoteProtocolError) as info:
            decoder.next_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "cap" in info.value.detail
    assert peak < 64 << 10


def test_a_4_gib_header_is_refused_before_it_is_complete() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_varint((4 << 30) - 1)[:-1])  # 28 bits of ones already exceed the cap
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
