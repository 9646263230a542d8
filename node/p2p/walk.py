"""A GET_PROVIDERS walk: the closest servers we know, then the closer peers their answers list (issue 43).

With more servers than k, the servers of our routing table closest to a key are mostly not the key's
holders: asking them all at once (`Kad.lookup_providers` in a small swarm) cost k requests that found
nothing and, with one departed server among them, the whole query deadline. A walk asks `ALPHA` at a
time, closest first, follows the closer peers each answer lists, and stops at the count asked or when
the k closest servers it knows have all been asked (where a kad lookup ends; once a server listed
providers, it does not wait out the deadline of one that left). It
does not stop at the first server that lists the key's providers: each writer sends its records to the
k closest servers its own walk found, and those views differ (in a lab of 22 serving workers a first
holder listed 2 of a key's 20 providers).
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
    """Walk towards `key` from the servers `start` until `count` providers, or the k closest answered."""
    target = int.from_bytes(hashlib.sha256(key).digest(), "big")

    def distance(peer: ID) -> int:
        return target ^ int.from_bytes(hashlib.sha256(peer.to_bytes()).digest(), "big")

    known = {peer: distance(peer) for peer in start}
    asked: set[ID] = set()
    providers: dict[ID, Any] = {}
    failures: dict[str, str] = {}
    answered = flying = 0
    held = False
    send, receive = trio.open_memory_channel[tuple[ID, Answer | str]](ALPHA)
    async with trio.open_nursery() as nursery:
        while True:
            closest = sorted(known, key=known.__getitem__)[:K]
            pending = [p for p in closest if p not in asked]
            for peer in pending[: ALPHA - flying]:
                asked.add(peer)
                flying += 1
                nursery.start_soon(_ask_one, ask, peer, timeout, send)
            if not flying or (held and not pending):  # the k closest asked: no straggler waited for
                break
            peer, answer = await receive.receive()
            flying -= 1
            if isinstance(answer, str):
                failures[peer.to_base58()] = answer
                continue
            answered += 1
            held = held or any(info.peer_id != peer for info in answer.providers)  # not only itself
            providers.update((info.peer_id, info) for info in answer.providers)
            known.update((info.peer_id, distance(info.peer_id)) for info in answer.closer)
            if len(providers) >= count:
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


__all__ = ["ALPHA", "Answer", "Walked", "walk_providers"]
