"""Our ADD_PROVIDERs to one server paced to the rate a py-libp2p server keeps (P34; pure, trio's clock).

A py-libp2p 0.8.1 kad server takes at most 10 ADD_PROVIDER messages from one peer in a window of 10 s
(`KadDHT._check_provider_rate_limit`: the window opens at the first message after the last one closed)
and resets the stream of every message past that, in silence: ADD_PROVIDER is fire-and-forget, so the
sender never learns its record was dropped. A worker provides one key per usable unit and one for any
worker, all at once when it joins (a GPU box with six runtimes: a dozen keys), and in a swarm whose
only servers are its gates every key goes to the same servers: the eleventh and later records were lost,
and the read-back's sends again fell in the same window (measured: a gate kept 10 of 16). A pacer sends
at most `most` a window to each server and holds the next until the window has closed, plus a margin
for the message's time on the wire (the server opens its window when it reads the first message: a
record is lost only if it read that one over `MARGIN_S` later than the one after the window, and then
the read-back or the next refresh sends it again).

This is a courtesy to servers, not a check: nothing here reads what another peer says.
"""

from __future__ import annotations

from typing import Final

import trio

PROVIDES_PER_WINDOW: Final = 10
"""ADD_PROVIDERs a py-libp2p 0.8.1 server takes from one peer per window (its `_provider_rate_max`)."""
WINDOW_S: Final = 10.0
"""That window (its `_provider_rate_window`)."""
MARGIN_S: Final = 1.0
"""Added to the window: the server's window opened when our first message arrived, not when it left."""


class ProvidePacer:
    """At most `most` sends to one server per `window_s` (+ `margin_s`); the rest wait their turn.

    Windows are kept per server as the server keeps them per sender: a window opens at the first send
    after the last one closed and counts the sends inside it.
    """

    KEPT: Final = 256
    """Windows kept before the closed ones are dropped (a long-lived node meets many servers)."""

    def __init__(
        self, most: int = PROVIDES_PER_WINDOW, window_s: float = WINDOW_S, margin_s: float = MARGIN_S
    ) -> None:
        self.most, self.window_s, self.margin_s = most, window_s, margin_s
        self._windows: dict[str, tuple[float, int]] = {}  # server -> (window opened at, sends in it)

    async def turn(self, server: str) -> None:
        """Wait until one more send to `server` fits its window, and count it."""
        while True:
            now = trio.current_time()
            opened, sent = self._windows.get(server, (now, 0))
            if now - opened >= self.window_s + self.margin_s:
                opened, sent = now, 0
            if sent < self.most:
                self._windows[server] = (opened, sent + 1)
                self._prune(now)
                return
            await trio.sleep_until(opened + self.window_s + self.margin_s)

    def _prune(self, now: float) -> None:
        if len(self._windows) > self.KEPT:
            closed = [
                s for s, (opened, _) in self._windows.items() if now - opened >= self.window_s + self.margin_s
            ]
            for server in closed:
                del self._windows[server]


__all__ = ["MARGIN_S", "PROVIDES_PER_WINDOW", "WINDOW_S", "ProvidePacer"]
