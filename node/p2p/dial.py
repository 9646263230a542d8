"""Dialling a peer's addresses in turn, each but the last under a short deadline (P3, P28 in `host`).

No libp2p import: `host` passes the one-address dial. A dead first address (a host that drops SYNs,
a port that accepts and never speaks: libp2p's own dial gives up after 10 s to 2 min) used to hold
the whole deadline, so the live second address was never tried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import trio

from node.errors import PeerTimeout, PeerUnreachable
from node.p2p.addrs import IPInterface, dial_order

PER_ADDRESS_S: Final = 3.0
"""The most one of several addresses may take to connect before the next one is tried."""


def dial_plan(addrs: Sequence[str], local: Sequence[IPInterface]) -> list[str | None]:
    """Direct addresses (`dial_order`: those on our networks first), then circuit addresses;
    `[None]` (whatever the peerstore knows) when there are none."""
    direct = dial_order([a for a in addrs if "/p2p-circuit" not in a], local)
    return [*direct, *(a for a in addrs if "/p2p-circuit" in a)] or [None]


async def dial_in_turn(
    peer_id: str,
    plan: Sequence[str | None],
    seconds: float,
    dial: Callable[[str | None], Awaitable[None]],
    per_address: float = PER_ADDRESS_S,
) -> None:
    """Dial each address of `plan` until one connects: each but the last gets `per_address` at most
    of what is left of `seconds`, the last all of it.

    Raises:
        PeerUnreachable: every address failed before the deadline (each failure named).
        PeerTimeout: the deadline passed.
    """
    errors: list[str] = []
    last: PeerUnreachable | None = None  # its chain keeps libp2p's and the socket's own errors
    deadline = trio.current_time() + seconds
    for i, addr in enumerate(plan):
        left = deadline - trio.current_time()
        if left <= 0:
            break
        cap = left if i == len(plan) - 1 else min(per_address, left)
        with trio.move_on_after(cap) as scope:
            try:
                await dial(addr)
                return
            except PeerUnreachable as exc:
                errors.append(exc.why)
                last = exc
        if scope.cancelled_caught:
            errors.append(f"{addr}: no connection within {cap:.3g} s")
    if trio.current_time() < deadline:
        raise PeerUnreachable(peer_id, "; ".join(errors) or "no address") from last
    raise PeerTimeout(peer_id, f"connecting within {seconds:g} s ({'; '.join(errors)})") from last


__all__ = ["PER_ADDRESS_S", "dial_in_turn", "dial_plan"]
