"""node.wire: framed channels over memory streams; every failure is one of our error types."""

from __future__ import annotations

import pytest
import trio

from node.errors import PeerGone, PeerTimeout, StreamRefused
from node.p2p.wire import Channel, memory_channel_pair
from protocol import Busy, ProfileGet, RemoteProtocolError
from protocol.framing import frame


async def test_round_trip() -> None:
    a, b = memory_channel_pair("a", "b")
    await a.send(ProfileGet())
    assert await b.receive() == ProfileGet()
    assert a.peer_id == "b"
    assert b.peer_id == "a"


async def test_eof_before_a_message_is_peer_gone() -> None:
    a, b = memory_channel_pair()
    await a.close()
    with pytest.raises(PeerGone):
        await b.receive()


async def test_silence_is_a_timeout() -> None:
    _, b = memory_channel_pair(read_timeout=0.05)
    with pytest.raises(PeerTimeout):
        await b.receive()


async def test_busy_reply_is_stream_refused() -> None:
    a, b = memory_channel_pair()
    await a.send(Busy(detail="full"))
    with pytest.raises(StreamRefused):
        await b.receive()


async def test_malformed_frames_raise_remote_protocol_error_only() -> None:
    for junk in (b"\xc1", b"\x92\x01", b"\x81\xa4kind\xa4nope", b"not msgpack at all"):
        a, b = memory_channel_pair()
        await a.send_raw(frame(junk))
        with pytest.raises(RemoteProtocolError):
            await b.receive()


async def test_oversized_frame_header_is_refused() -> None:
    a, b = memory_channel_pair()
    await a.send_raw(b"\xff\xff\xff\xff\x0f")  # varint header announcing 4 GiB
    with pytest.raises(RemoteProtocolError):
        await b.receive()


async def test_receive_raw_returns_empty_at_eof() -> None:
    a, b = memory_channel_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.close)
        assert await b.receive_raw() == b""


class _Ends:
    """A `ByteStream` that keeps how it was ended (a transport of its own, to watch `Channel` use it)."""

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def read(self, max_bytes: int) -> bytes:
        return b""

    async def write(self, data: bytes) -> None:
        return None

    async def close(self) -> None:
        self.ended.append("close")

    async def reset(self) -> None:
        self.ended.append("reset")


async def test_a_channel_block_closes_when_it_ends_and_resets_when_left_by_an_exception() -> None:
    normal, failed, cancelled = _Ends(), _Ends(), _Ends()
    async with Channel(normal, "peer") as channel:
        await channel.send(ProfileGet())
    with pytest.raises(RuntimeError):
        async with Channel(failed, "peer"):
            raise RuntimeError("the caller gave up")
    with trio.move_on_after(0):
        async with Channel(cancelled, "peer"):
            await trio.sleep_forever()
    assert (normal.ended, failed.ended, cancelled.ended) == (["close"], ["reset"], ["reset"])
