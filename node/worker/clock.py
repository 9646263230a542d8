"""`/sark/clock/1.0.0`: the worker's wall clock, read for each of a submitter's probe rounds.

A fleet job starts its members at one instant of the submitter's clock (`protocol.fleet`): the
submitter sends `ClockGet` rounds on one stream and keeps the tightest round's midpoint as this
worker's offset. The handler answers each round with `time.time()` read as the round arrives, at
most `CLOCK_ROUNDS` rounds, then the stream ends.
"""

from __future__ import annotations

import time

from node.errors import NodeError
from node.p2p.wire import Channel
from protocol import ClockGet, ClockReply
from protocol.errors import RemoteProtocolError
from protocol.fleet import CLOCK_ROUNDS


async def serve_clock(channel: Channel) -> None:
    """Answer up to `CLOCK_ROUNDS` clock rounds; anything else is the peer's protocol error."""
    for _ in range(CLOCK_ROUNDS):
        try:
            asked = await channel.receive()
        except NodeError:
            return  # the submitter took the rounds it wanted and closed the stream
        if not isinstance(asked, ClockGet):
            raise RemoteProtocolError(f"a clock stream carries clock_get, not {asked.kind}")
        await channel.send(ClockReply(round=asked.round, now=time.time()))


__all__ = ["serve_clock"]
