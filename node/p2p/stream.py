"""libp2p streams as our byte streams, and the guards every inbound stream runs under.

Moved out of `node.p2p.host` whole (P1, P4 of shared/notes/libp2p.md; the host's docstring lists
every workaround): `LibStream` turns EOF into `b""` (P4) and libp2p's stream errors into `PeerGone`;
`guarded_handler` keeps a failing swarm-level handler from tearing the host down (P1); `refuse`
answers a stream over its per-peer cap with `Busy`; `run_handler` runs one of our handlers under its
deadline and resets its stream when it fails.

`run_handler` is the one place an inbound stream of ours ends badly: it waits for the first whole
frame under `first_frame_s` (every protocol of ours opens with the caller's request: offer, reclaim,
profile_get, blob_get, reach_get), and resets the stream when that frame does not come, when its
length prefix is junk, or when the handler raises anything (undecodable msgpack, an unknown kind, a
message its conversation does not allow, a peer gone or late). Handlers let such errors escape.
"""

from __future__ import annotations

import logging
import math
from contextlib import suppress
from typing import Any, Final, final

import trio
from libp2p.io.exceptions import IOException
from libp2p.network.stream.exceptions import StreamEOF
from libp2p.stream_muxer.exceptions import MuxedStreamError

from node.errors import NodeError, PeerGone
from node.p2p.wire import Channel, Handler
from protocol import Busy, ProtocolError
from protocol.codec import encode
from protocol.framing import frame

log = logging.getLogger("node.p2p.host")  # the host's logger, as before the move

STREAM_ERRORS: Final = (IOException, MuxedStreamError)
"""What libp2p raises from a stream's read, write, close and reset."""
FIRST_FRAME_S: Final = 5.0
"""Default deadline for an inbound stream's first whole frame (`NodeConfig.first_frame_s`)."""
_PEER_FAULTS: Final = (NodeError, ProtocolError)
"""What a handler raises when the peer, not our code, broke the conversation: logged in one line."""


@final
class LibStream:
    """A libp2p stream as a `node.p2p.wire.ByteStream`: EOF is `b""` (P4), errors are `PeerGone`."""

    def __init__(self, stream: Any, peer_id: str) -> None:
        self._stream = stream
        self._peer_id = peer_id

    async def read(self, max_bytes: int) -> bytes:
        try:
            return bytes(await self._stream.read(max_bytes))
        except StreamEOF:
            return b""
        except STREAM_ERRORS as exc:
            raise PeerGone(self._peer_id) from exc

    async def write(self, data: bytes) -> None:
        try:
            await self._stream.write(data)
        except STREAM_ERRORS as exc:
            raise PeerGone(self._peer_id) from exc

    async def close(self) -> None:
        with trio.move_on_after(2):
            with suppress(*STREAM_ERRORS):
                await self._stream.close()

    async def reset(self) -> None:
        with trio.move_on_after(2):
            with suppress(*STREAM_ERRORS):
                await self._stream.reset()


@final
class PacedStream:
    """A libp2p stream for a handler that is not ours (kad): each request must arrive in time.

    Every read must finish within `idle_s` of the stream's opening or of our last write (the answer
    to the request before), else it raises `trio.TooSlowError`, which libp2p's handler treats as a
    read error and resets the stream. Everything else is the stream's own.
    """

    def __init__(self, stream: Any, idle_s: float) -> None:
        self._stream = stream
        self._idle_s = idle_s
        self._deadline = trio.current_time() + idle_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def read(self, n: int | None = None) -> bytes:
        with trio.fail_at(self._deadline):
            return bytes(await self._stream.read(n))

    async def write(self, data: bytes) -> None:
        await self._stream.write(data)
        self._deadline = trio.current_time() + self._idle_s


def guarded_handler(handler: Any) -> Any:
    """P1: an exception escaping any stream handler must not tear down the host."""

    async def guarded(stream: Any) -> None:
        try:
            await handler(stream)
        except Exception:
            log.debug("stream handler failed; stream reset", exc_info=True)
            await LibStream(stream, "?").reset()

    return guarded


def remote_ip(stream: Any) -> str | None:
    """The remote IP of a libp2p stream's connection, or None when it has none."""
    try:
        remote = stream.muxed_conn.get_remote_address()
    except Exception:  # relayed and closing connections have no address; the caller treats None as unknown
        return None
    return str(remote[0]) if remote else None


async def refuse(stream: LibStream, detail: str) -> None:
    """Answer a stream over its per-peer cap with `Busy` (P22), then close it."""
    with trio.move_on_after(1):
        with suppress(PeerGone):
            await stream.write(frame(encode(Busy(detail=detail))))
    await stream.close()


async def run_handler(
    handler: Handler, channel: Channel, deadline: float, first_frame_s: float = FIRST_FRAME_S
) -> None:
    """Run one of our handlers under its deadline (P3); reset the stream if it fails or runs late.

    The handler starts only once the stream's first whole frame has arrived within `first_frame_s`.
    """
    try:
        with trio.move_on_after(deadline if deadline > 0 else math.inf) as scope:
            await channel.await_first_frame(first_frame_s)
            await handler(channel)
        if scope.cancelled_caught:
            log.info("handler for %s passed its %g s deadline; stream reset", channel.peer_id, deadline)
            await channel.reset()
    except Exception as exc:
        fault = _peer_fault(exc)
        if fault is not None:
            log.info("stream from %s reset: %s", channel.peer_id, fault)
        else:
            log.info("handler for %s failed; stream reset", channel.peer_id, exc_info=True)
        await channel.reset()


def _peer_fault(exc: BaseException) -> BaseException | None:
    """The first peer fault in `exc` (a group from a handler's nursery included) if that is all it holds."""
    if isinstance(exc, _PEER_FAULTS):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        faults = [_peer_fault(e) for e in exc.exceptions]
        if all(f is not None for f in faults):
            return faults[0]
    return None


__all__ = [
    "FIRST_FRAME_S",
    "STREAM_ERRORS",
    "LibStream",
    "PacedStream",
    "guarded_handler",
    "refuse",
    "remote_ip",
    "run_handler",
]
