"""The seam between the pure protocol and I/O: a tiny byte stream and a framed message channel.

Every read has a deadline; a foreign error never escapes: EOF becomes `PeerGone`, a deadline
`PeerTimeout`, bad bytes `RemoteProtocolError` (from `protocol.codec`). An inbound stream's first
frame is awaited under its own short deadline (`Channel.await_first_frame`) before any handler runs.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Final, Protocol, final

import trio

from node.errors import PeerGone, PeerTimeout, StreamRefused
from protocol import Busy, Message
from protocol.codec import decode, encode
from protocol.framing import MAX_FRAME, FrameDecoder, frame

CLOSE_S: Final = 1.0
"""How long leaving a channel's `async with` may spend closing it (shielded from cancellation)."""


class ByteStream(Protocol):
    """What a channel needs from a transport stream (libp2p stream, memory stream)."""

    async def read(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` bytes; `b""` at EOF."""
        ...

    async def write(self, data: bytes) -> None:
        """Write all of `data`."""
        ...

    async def close(self) -> None:
        """Close our side gracefully."""
        ...

    async def reset(self) -> None:
        """Abort the stream in both directions."""
        ...


@final
class Channel:
    """Framed `protocol.Message` I/O over one byte stream, with a deadline on every read.

    An async context manager: `async with channel:` closes it gracefully when the block ends, and
    resets it when an exception (an error or a cancellation) leaves the block: the peer must not
    wait for, or keep sending, the rest of a conversation we abandoned.

    Attributes:
        peer_id: the authenticated peer at the other end.
        remote_ip: the IP address the peer's connection comes from, when known (inbound streams).
    """

    def __init__(
        self,
        stream: ByteStream,
        peer_id: str,
        *,
        read_timeout: float = 10.0,
        max_frame: int = MAX_FRAME,
        remote_ip: str | None = None,
    ) -> None:
        self.peer_id = peer_id
        self.remote_ip = remote_ip
        self._stream = stream
        self._read_timeout = read_timeout
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._pending = b""  # read ahead by `await_first_frame`, not yet handed to a reader

    async def __aenter__(self) -> Channel:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_S):
            await (self.close() if exc is None else self.reset())

    async def send(self, message: Message) -> None:
        """Encode, frame and write one message."""
        await self._stream.write(frame(encode(message)))

    async def send_raw(self, framed: bytes) -> None:
        """Write bytes that are already framed (e.g. from `protocol.machine.Conversation.send`)."""
        await self._stream.write(framed)

    async def await_first_frame(self, deadline: float) -> None:
        """Read ahead until one whole frame has arrived, and keep it for the handler's first read.

        Raises:
            PeerTimeout: no whole frame within `deadline` (a silent or dripping peer).
            PeerGone: the stream ended before a whole frame.
            RemoteProtocolError: the length prefix is malformed or announces more than the cap.
        """
        decoder = FrameDecoder(self._max_frame)
        with trio.move_on_after(deadline if deadline > 0 else math.inf):
            while decoder.next_frame() is None:
                data = await self._stream.read(65536)
                if not data:
                    raise PeerGone(self.peer_id)
                self._pending += data
                decoder.feed(data)
            return
        raise PeerTimeout(self.peer_id, f"no whole first frame within {deadline:g} s")

    def _take_pending(self) -> bytes:
        pending, self._pending = self._pending, b""
        return pending

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message.

        Raises:
            PeerGone: the stream ended before a whole message.
            PeerTimeout: no whole message within the deadline.
            RemoteProtocolError: the bytes are not a valid message (or the frame is too large).
            StreamRefused: the peer answered `busy`.
        """
        deadline = self._read_timeout if timeout is None else timeout
        self._decoder.feed(self._take_pending())
        with trio.move_on_after(deadline if deadline > 0 else math.inf):
            while True:
                payload = self._decoder.next_frame()
                if payload is not None:
                    return self._checked(decode(payload))
                data = await self._stream.read(65536)
                if not data:
                    raise PeerGone(self.peer_id)
                self._decoder.feed(data)
        raise PeerTimeout(self.peer_id, f"no message within {deadline:g} s")

    def _checked(self, message: Message) -> Message:
        if isinstance(message, Busy):
            raise StreamRefused(self.peer_id, message.detail, measuring=message.measuring)
        return message

    async def receive_raw(
        self,
        max_bytes: int = 65536,
        timeout: float | None = None,
    ) -> bytes:
        """Raw bytes as they arrive (`b""` at EOF), for a caller that runs its own decoder."""
        if self._pending:
            return self._take_pending()
        deadline = self._read_timeout if timeout is None else timeout
        with trio.move_on_after(deadline if deadline > 0 else math.inf):
            return await self._stream.read(max_bytes)
        raise PeerTimeout(self.peer_id, f"no bytes within {deadline:g} s")

    async def close(self) -> None:
        """Close our side gracefully."""
        await self._stream.close()

    async def reset(self) -> None:
        """Abort the stream."""
        await self._stream.reset()


Handler = Callable[[Channel], Awaitable[None]]


@final
class _MemoryStream:
    """A `ByteStream` over one end of `trio.testing.memory_stream_pair`."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int) -> bytes:
        try:
            return bytes(await self._stream.receive_some(max_bytes))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def write(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise PeerGone("memory") from exc

    async def close(self) -> None:
        await self._stream.aclose()

    async def reset(self) -> None:
        await trio.aclose_forcefully(self._stream)


def memory_channel_pair(
    left_peer: str = "left", right_peer: str = "right", *, read_timeout: float = 10.0, lockstep: bool = False
) -> tuple[Channel, Channel]:
    """Two connected channels in memory: the left one talks to `right_peer` and vice versa.

    With `lockstep`, a send waits until the other side has read it (a muxer whose window is full),
    so a reader that stops stalls the sender; otherwise sends are buffered without bound.
    """
    import trio.testing  # here, not at the top: it imports pytest where pytest is installed

    a, b = trio.testing.lockstep_stream_pair() if lockstep else trio.testing.memory_stream_pair()
    return (
        Channel(_MemoryStream(a), right_peer, read_timeout=read_timeout),
        Channel(_MemoryStream(b), left_peer, read_timeout=read_timeout),
    )


__all__ = ["ByteStream", "Channel", "Handler", "memory_channel_pair"]
