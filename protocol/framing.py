"""Length-prefixed frames: an unsigned LEB128 varint length, then that many payload bytes.

The decoder is incremental (feed any slices of the stream, take whole frames out) and checks the
announced length against its cap while still reading the header, so a peer announcing 4 GiB costs
nothing: the error comes before any buffer is sized for it.
"""

from __future__ import annotations

from typing import Final, NoReturn, final

from protocol.errors import LocalProtocolError, RemoteProtocolError

MAX_FRAME: Final = 4 << 20
"""Default cap on one frame's payload (blob chunks are <= 1 MiB plus message overhead)."""
MAX_HEADER: Final = 10
"""A LEB128 varint of a 64-bit length never needs more than 10 bytes."""


def encode_varint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned LEB128 varint.

    Args:
        value: the number, 0 <= value < 2**64.

    Returns:
        The varint bytes, in minimal form.

    Raises:
        LocalProtocolError: the number is negative or needs more than 64 bits.
    """
    if value < 0 or value >= 1 << 64:
        raise LocalProtocolError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its varint length.

    Args:
        payload: one encoded message.

    Returns:
        The bytes to write to the stream.
    """
    return encode_varint(len(payload)) + payload


@final
class FrameDecoder:
    """Incremental frame decoder for one byte stream.

    After it has raised once the stream is broken for good: every later `next_frame` raises again.
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        """Start with an empty buffer.

        Args:
            max_frame: the largest payload accepted; a header announcing more is refused.
        """
        if max_frame < 0:
            raise ValueError(f"max_frame must be >= 0, got {max_frame}")
        self._max_frame = max_frame
        self._buffer = bytearray()
        self._broken: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """How many received bytes are not yet returned as a frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        """Add bytes received from the stream.

        Args:
            data: any slice of the stream, possibly empty.
        """
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """Take the next whole frame's payload out of the buffer.

        Returns:
            The payload, or None while more bytes are needed.

        Raises:
            RemoteProtocolError: the header is malformed or announces more than `max_frame`.
        """
        if self._broken is not None:
            raise RemoteProtocolError(f"stream already broken: {self._broken.detail}")
        header = self._read_header()
        if header is None:
            return None
        length, start = header
        end = start + length
        if len(self._buffer) < end:
            return None
        with memoryview(self._buffer) as view:
            payload = bytes(view[start:end])  # one copy (a bytearray slice would make two)
        del self._buffer[:end]
        return payload

    def _read_header(self) -> tuple[int, int] | None:
        """Parse the length header: (payload length, header size), or None if it is incomplete."""
        value = 0
        for index, byte in enumerate(self._buffer[:MAX_HEADER]):
            value |= (byte & 0x7F) << (7 * index)
            if value > self._max_frame:
                self._fail(f"frame of {value}+ bytes announced, cap is {self._max_frame}")
            if not byte & 0x80:
                if byte == 0 and index > 0:
                    self._fail("non-minimal varint length")
                return value, index + 1
        if len(self._buffer) >= MAX_HEADER:
            self._fail("varint length longer than 10 bytes")
        return None

    def _fail(self, detail: str) -> NoReturn:
        self._broken = RemoteProtocolError(detail)
        raise self._broken
