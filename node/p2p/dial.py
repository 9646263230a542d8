"""Dialling a peer's addresses in turn, each but the last under a short deadline (P3, P28 in `host`).

No libp2p import: `host` passes the one-address dial. A peer's addresses are its own claim, so a few
are dialled, not all (`dial_plan`), those where it was seen first (`Sightings`). A dead first
address (a host that drops SYNs, a port that accepts and never speaks: libp2p's own dial gives up
after 10 s to 2 min) used to hold the whole deadline, so the live second address was never tried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, final

import trio

from node.errors import PeerTimeout, PeerUnreachable
from node.p2p.addrs import IPInterface, dial_order, ip_of

PER_ADDRESS_S: Final = 3.0
"""The most one of several addresses may take to connect before the next one is tried."""
MAX_DIRECT: Final = 3
"""Direct addresses of one peer dialled at most, per connection attempt."""
MAX_CIRCUITS: Final = 2
"""Circuit addresses (each dials its relay) of one peer dialled at most, per connection attempt."""
SEEN_ADDRS: Final = 4
"""Addresses remembered per peer."""
SEEN_PEERS: Final = 4096
"""Peers remembered; the one seen longest ago is forgotten first."""


def dial_plan(
    addrs: Sequence[str], local: Sequence[IPInterface], seen: Sequence[str] = ()
) -> list[str | None]:
    """Which of a peer's addresses to dial, in order: at most `MAX_DIRECT` direct addresses, first
    those where the peer was seen (`Sightings`: the address itself, then its IP), then `dial_order`
    (our networks first, then the peer's order); then at most `MAX_CIRCUITS` circuit addresses;
    `[None]` (whatever the peerstore knows) when there are none.

    An advert is the peer's own claim: one listing the addresses of other services (a decoy's 200)
    made every dialer connect to each of them in turn.
    """
    unique = list(dict.fromkeys(addrs))
    seen_ips = {ip_of(a) for a in seen} - {None}

    def rank(addr: str) -> int:  # sorted is stable: `dial_order` within each rank
        return 0 if transport(addr) in seen else 1 if ip_of(addr) in seen_ips else 2

    direct = sorted(dial_order([a for a in unique if "/p2p-circuit" not in a], local), key=rank)
    circuits = [a for a in unique if "/p2p-circuit" in a]
    return [*direct[:MAX_DIRECT], *circuits[:MAX_CIRCUITS]] or [None]


def transport(addr: str) -> str:
    """A direct multiaddr without its `/p2p/<id>`."""
    return addr.split("/p2p/", 1)[0]


@final
class Sightings:
    """Where peers were seen: the address each connection to them was made at, and the first
    addresses the DHT's provider records give for them; a few per peer, a bounded number of peers."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, ...]] = {}

    def saw(self, peer_id: str, *addrs: str | None) -> None:
        """The peer was reached, or listed by the DHT, at these addresses (the latest first)."""
        direct = [transport(a) for a in addrs if a is not None and "/p2p-circuit" not in a]
        if direct:
            known = self._seen.pop(peer_id, ())
            self._seen[peer_id] = tuple(dict.fromkeys([*direct, *known]))[:SEEN_ADDRS]
            while len(self._seen) > SEEN_PEERS:
                del self._seen[next(iter(self._seen))]

    def of(self, peer_id: str) -> tuple[str, ...]:
        """The addresses (no `/p2p/`) the peer was seen at, the latest first."""
        return self._seen.get(peer_id, ())


async def dial_in_turn(
    peer_id: str,
    plan: Sequence[str | None],
    seconds: float,
    dial: Callable[[str | None], Awaitable[None]],
    per_address: float = PER_ADDRESS_S,
) -> str | None:
    """Dial each address of `plan` until one connects (returned): each but the last gets
    `per_address` at most of what is left of `seconds`, the last all of it.

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
                return addr
            except PeerUnreachable as exc:
                errors.append(exc.why)
                last = exc
        if scope.cancelled_caught:
            errors.append(f"{addr}: no connection within {cap:.3g} s")
    if trio.current_time() < deadline:
        raise PeerUnreachable(peer_id, "; ".join(errors) or "no address") from last
    raise PeerTimeout(peer_id, f"connecting within {seconds:g} s ({'; '.join(errors)})") from last


__all__ = ["MAX_CIRCUITS", "MAX_DIRECT", "PER_ADDRESS_S", "Sightings", "dial_in_turn", "dial_plan"]
