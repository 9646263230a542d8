"""A GET_PROVIDERS walk: the closest servers we know, then the closer peers their answers list (issue 43).

With more servers than k, the servers of our routing table closest to a key are mostly not the key's
holders: asking them all at once (`Kad.lookup_providers` in a small swarm) cost k requests that found
nothing and, with one departed server among them, the whole query deadline. A walk asks `ALPHA` at a
time, closest first, follows the closer peers each answer lists, and stops at the count asked, at the
first server that lists the key's providers (every holder of a key got the same records), or when the
k closest it knows have answered. Asking a second holder too (`HOLDERS` = 2, against a holder that
joined after a provider's last write) made the holders of the keys every lookup reads (the first
levels of the tree) the busiest servers: 1.16 % of the lookup bytes at 10,000 devices in
`benchmarks/swarm_sim.py`, over issue 43's 1 %.
`benchmarks/swarm_net.walk` simulates the same walk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from libp2p.peer.id import ID

ALPHA: Final = 3
"""Requests of one walk in flight at once."""
HOLDERS: Final = 1
"""Servers listing a key's providers after which a walk stops."""
K: Final = 20


@dataclass(frozen=True)
class Answer:
    """One server's answer: the providers it lists and the closer peers (libp2p `PeerInfo`s)."""

    providers: list[Any]
    closer: list[Any]


@dataclass(frozen=True)
class Walked:
    """What a walk found: providers (peer id -> `PeerInfo`), servers asked and answered, failures."""

    providers: dict[ID, Any]
    asked: int
    answered: int
    failures: dict[str, str] = field(default_factory=dict)


async def walk_providers(
    key: bytes, start: Sequence[ID], ask: Callable[[ID], Awaitable[Answer]], count: int, timeout: float
) -> Walked:
    """Walk towards `key` from the servers `start` until `count` providers or `HOLDERS` holders."""
    target = int.from_bytes(hashlib.sha256(key).digest(), "big")

    def distance(peer: ID) -> int:
        return target ^ int.from_bytes(hashlib.sha256(peer.to_bytes()).digest(), "big")

    known = {peer: distance(peer) for peer in start}
    asked: set[ID] = set()
    providers: dict[ID, Any] = {}
    failures: dict[str, str] = {}
    answered = holders = flying = 0
    send, receive = trio.open_memory_channel[tuple[ID, Answer | str]](ALPHA)
    async with trio.open_nursery() as nursery:
        while True:
            closest = sorted(known, key=known.__getitem__)[:K]
            for peer in [p for p in closest if p not in asked][: ALPHA - flying]:
                asked.add(peer)
                flying += 1
                nursery.start_soon(_ask_one, ask, peer, timeout, send)
            if not flying:
                break
            peer, answer = await receive.receive()
            flying -= 1
            if isinstance(answer, str):
                failures[peer.to_base58()] = answer
                continue
            answered, holders = answered + 1, holders + bool(answer.providers)
            providers.update((info.peer_id, info) for info in answer.providers)
            known.update((info.peer_id, distance(info.peer_id)) for info in answer.closer)
            if len(providers) >= count or holders >= HOLDERS:
                break
        nursery.cancel_scope.cancel()
    return Walked(providers, len(asked), answered, failures)


async def _ask_one(
    ask: Callable[[ID], Awaitable[Answer]],
    peer: ID,
    timeout: float,
    send: trio.MemorySendChannel[tuple[ID, Answer | str]],
) -> None:
    answer: Answer | str = "timed out"
    with trio.move_on_after(timeout):
        try:
            answer = await ask(peer)
        except Exception as exc:  # libp2p's stream and parse errors: this server did not answer
            answer = f"{type(exc).__name__}: {exc}"[:200]
    await send.send((peer, answer))


__all__ = ["ALPHA", "HOLDERS", "Answer", "Walked", "walk_providers"]
