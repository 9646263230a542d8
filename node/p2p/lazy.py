"""A request stream whose protocol is negotiated in the request's own flight (multistream-select, lazily).

py-libp2p's `new_stream` negotiates before the caller may write: it sends multistream's header and
waits for the echo, then proposes the protocol and waits for its echo. With the request and its answer
that is three round trips for one kad request on a connection already up (measured on real hosts,
`benchmarks/conn_cost.py`: 3.05 round trips by the slope over two delays), and a lookup's walk is a
chain of such requests: on a wide-area link each costs three times what the request needs.

`open_lazily` writes the header, the protocol and the caller's first message at once, then reads the
two echoes before the caller reads its answer: one round trip. This is multistream-select's own
pipelining, as go-libp2p's lazy client negotiation does when it proposes a single protocol: a server
that speaks the protocol reads the header, the proposal and the request in order from the same bytes
(py-libp2p's, go's and js's read one length-prefixed line at a time). A server that does not answers
`na` to the proposal and then reads the request as a second proposal; the stream is reset and the
caller gets `LazyRefused`, as `new_stream` raises `StreamFailure`: the same outcome, one flight sooner.

The cheater's view: none. A server chooses its answer either way; this changes when we send, not what
we accept (the echoes must be exactly the header and the protocol we proposed).
"""

from __future__ import annotations

from typing import Any, Final

from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.protocol_muxer.multiselect import MULTISELECT_PROTOCOL_ID
from libp2p.utils.varint import encode_delim, read_varint_prefixed_bytes_limited

LINE_LIMIT: Final = 1024
"""The longest multistream line we read back (a protocol id and its newline)."""


class LazyRefused(Exception):
    """The server did not echo multistream's header or our protocol: the stream was reset."""


async def open_lazily(raw_host: Any, peer: ID, protocol: str, first: bytes) -> Any:
    """A stream to `peer` for `protocol`, `first` written with the negotiation in one flight; the two
    echoes are read before it is returned (the caller then reads its answer). Dials when not connected.

    Raises:
        LazyRefused: the server answered anything but the header and the protocol.
        Exception: libp2p's dial and stream errors, as `new_stream` raises them.
    """
    stream = await raw_host.get_network().new_stream(peer)
    try:
        await stream.write(
            encode_delim(MULTISELECT_PROTOCOL_ID.encode()) + encode_delim(protocol.encode()) + first
        )
        for expected in (MULTISELECT_PROTOCOL_ID, protocol):
            line = bytes(await read_varint_prefixed_bytes_limited(stream, LINE_LIMIT))
            if line != expected.encode() + b"\n":
                raise LazyRefused(f"{peer}: {protocol}: the server answered {line[:80]!r}")
    except BaseException:
        await stream.reset()
        raise
    stream.set_protocol(TProtocol(protocol))
    return stream


__all__ = ["LINE_LIMIT", "LazyRefused", "open_lazily"]
