"""A GET_PROVIDERS walk over the network: trio's driver of `node.p2p.shortlist.Shortlist` (issue 43).

`walk_providers` keeps `ALPHA` requests in flight, frees a request's slot after its hop
(`HOP_S`) while it stays open to its deadline, hands each answer or failure to the walk's state, and
stops when the state says the walk is done; what ends a walk, what counts as agreement and which
providers a key keeps are the state's rules, with their figures, in `node.p2p.shortlist`.

A walk for a submitter's look counts its hops and its requests' deadlines in the look's own seconds
(`run_delay`, `node.p2p.looktime`): each request's dial, handshake and answer are this process's
work, and at a twentieth of a core (the Sybil-networks lab's `submit` at nice 10 beside two spinners
on its core) the walks past twenty Sybils' keys timed their hops out on real seconds and the look
ended with the honest level unread. Every other walk (a worker's read-back, a gate's) counts real
seconds, as `run_delay`'s default (`no_delay`) makes them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from libp2p.peer.id import ID

from node.p2p.looktime import LookTime, no_delay, within
from node.p2p.shortlist import ALPHA, BEFORE_ALPHA, HOP_S, Shortlist, key_distance


@dataclass(frozen=True)
class Answer:
    """One server's answer: the providers it lists and the closer peers (libp2p `PeerInfo`s)."""

    providers: list[Any]
    closer: list[Any]


@dataclass(frozen=True)
class Walked:
    """What a walk found: providers (peer id -> `PeerInfo`), servers asked and answered, failures, what
    each server that answered listed, the k closest servers known at the end (closest first), and how
    many providers the key holds as most of its holders' networks say (`Shortlist.holds`)."""

    providers: dict[ID, Any]
    asked: int
    answered: int
    failures: dict[str, str] = field(default_factory=dict)
    lists: dict[ID, frozenset[ID]] = field(default_factory=dict)
    closest: tuple[ID, ...] = ()
    holds: int = 0

    def lacking(self, provider: ID) -> tuple[ID, ...]:
        """The k closest servers that answered without listing `provider` (closest first): where a
        writer's record is missing."""
        return tuple(p for p in self.closest if p in self.lists and provider not in self.lists[p])


async def walk_providers(
    key: bytes,
    start: Sequence[ID],
    ask: Callable[[ID], Awaitable[Answer]],
    count: int,
    timeout: float,
    draw: random.Random | None = None,
    hop: float = HOP_S,
    agree: bool = True,
    network: Callable[[ID], Hashable] | None = None,
    short: bool = False,
    run_delay: Callable[[], float] = no_delay,
    every: bool = False,
) -> Walked:
    """Walk towards `key` from the servers `start` (`Shortlist`; `draw`: a seeded generator for tests).

    A request unanswered after `hop` seconds frees its slot and stays open until `timeout`; `agree`
    False walks on to the k closest past holders that agree (a writer's read-back); `network`: a
    server's network, read when it answered (`Shortlist`). `short`: the rule before issue 50 (`AGREED`
    holders that agree end the walk, each holder counted alone, whatever its network, `BEFORE_ALPHA`
    in flight), for the side-by-side of the hostile-server lab (`test_hostile_servers.py`). `run_delay`:
    the run delay of the thread running the walk (`node.p2p.looktime`): its hops and `timeout` are then
    the walk's own seconds, the machine's waits for a CPU given back. `every`: the walk ends only when
    none of the key's k closest may still answer (`Shortlist`'s `every`: a look's second read of a key
    whose first one listed providers that did not answer, `node.p2p.dht.Dht.lookup`)."""
    where = None if short else network
    draw = draw or random.Random()
    state = Shortlist(start, key_distance(key), count, draw, agree, short=short, network=where, every=every)
    providers: dict[ID, Any] = {}
    failures: dict[str, str] = {}
    sent: dict[ID, float] = {}  # open requests: when each was sent
    lists: dict[ID, frozenset[ID]] = {}
    answered = 0
    alpha = BEFORE_ALPHA if short else ALPHA
    clock = LookTime(math.inf, run_delay)  # the walk's own seconds: `clock.spent()`
    send, receive = trio.open_memory_channel[tuple[ID, Answer | str]](alpha)
    async with trio.open_nursery() as nursery:
        while True:
            now = clock.spent()
            active = sum(1 for at in sent.values() if now < at + hop)
            for peer in state.next(alpha - active):
                sent[peer] = now
                nursery.start_soon(_ask_one, ask, peer, timeout, run_delay, send)
            if state.done({p: now - at for p, at in sent.items()}, hop):
                break
            # the first open hop's own seconds left, waited as real ones (at least as long), then read again
            wait = min((at + hop - now for at in sent.values() if now < at + hop), default=math.inf)
            for peer, answer in await _answers(receive, wait):
                took = clock.spent() - sent.pop(peer)
                if isinstance(answer, str):
                    failures[peer.to_base58()] = answer
                    state.failed(peer)
                    continue
                answered += 1
                providers.update((info.peer_id, info) for info in answer.providers)
                listed = lists[peer] = frozenset(info.peer_id for info in answer.providers)
                state.answered(peer, listed, (info.peer_id for info in answer.closer), took)
        nursery.cancel_scope.cancel()
    return _walked(state, providers, answered, failures, lists)


def _walked(
    state: Shortlist[ID],
    providers: dict[ID, Any],
    answered: int,
    failures: dict[str, str],
    lists: dict[ID, frozenset[ID]],
) -> Walked:
    """What a walk found, its providers in the state's rank (`Kad` keeps the first `count`)."""
    ranked = {p: providers[p] for p in state.ranked(providers)}
    return Walked(ranked, len(state.asked), answered, failures, lists, tuple(state.closest()), state.holds())


async def _answers(
    receive: trio.MemoryReceiveChannel[tuple[ID, Answer | str]], wait: float
) -> list[tuple[ID, Answer | str]]:
    """The first answer within `wait` seconds, and every other already here, before the next decision."""
    came: list[tuple[ID, Answer | str]] = []
    with trio.move_on_after(wait):
        came.append(await receive.receive())
    while True:
        try:
            came.append(receive.receive_nowait())
        except trio.WouldBlock:
            return came


async def _ask_one(
    ask: Callable[[ID], Awaitable[Answer]],
    peer: ID,
    timeout: float,
    run_delay: Callable[[], float],
    send: trio.MemorySendChannel[tuple[ID, Answer | str]],
) -> None:
    answer: Answer | str = "timed out"
    try:
        got = await within(timeout, run_delay, partial(ask, peer))  # `timeout` of the walk's own seconds
        answer = answer if got is None else got
    except Exception as exc:  # libp2p's stream and parse errors: this server did not answer
        answer = f"{type(exc).__name__}: {exc}"[:200]
    await send.send((peer, answer))


__all__ = ["Answer", "Walked", "walk_providers"]
