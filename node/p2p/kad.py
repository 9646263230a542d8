"""Queries on a running kad-dht (`node.p2p.kadpatch` opens it): puts, gets, provides and lookups.

Workarounds (py-libp2p 0.8.1, shared/notes/libp2p.md):

- P9 `find_providers()` answers from the local cache once it has any entry, with duplicates:
  `find_providers` here never calls it (it asks the servers itself, `lookup_providers`) and
  de-duplicates.
- P20 connecting does not fill the routing table: `bootstrap` adds the gates and runs a self-lookup.
- How one request reaches one server and comes back is `node.p2p.kadlink` (P23 client side: a few
  streams open to a server; P41: a broken connection dialled again once; the network each reached).
- Lookups ask the servers in our routing table directly and concurrently, one round trip per key
  (with only servers in the tables, they hold every record of a swarm of up to k servers); a server
  that stalls is a failure like one that refuses, never a cue for libp2p's own iterative lookup (nor,
  for a value, its `get_value`). With
  more than k servers in our table, a lookup walks instead (`node.p2p.walk`: drawn among the k closest
  known, then the closer peers).
- Sharded keys (`node.p2p.shards`) need a per-key bound that libp2p has only globally (`BUCKET_SIZE`,
  which the old `sark/cap/v1/` keys need at `PROVIDERS_PER_KEY`): `Kad.bound_providers` wraps this
  server's `add_provider` with a bound per key (a new provider past it is ignored, as libp2p does; a
  known one is refreshed). A lookup stops asking once it has the count asked.
  The same wrap keeps at most `places.per_network` records of a key from one network, the /24 or /48
  of the inbound kad stream's connection (`SENDER`, set by `kadpatch`'s handler; `node.p2p.places`).
- libp2p walks the network before every ADD_PROVIDER and PUT_VALUE (and walks again for the keys in
  its `providing_keys` on its own republish timer): `provide` and `put` send to the closest servers
  the last walk found (`node.p2p.closest`), walking only every few refreshes or after a failure;
  libp2p's own republish of the values we put (a walk and k PUT_VALUEs every maintenance loop) is off.
- py-libp2p attaches our signed peer record (~215 B) to every request, twice to an ADD_PROVIDER: a
  standard kad-dht (go, js) sends none, nor do our writes (`node.p2p.kadwire`). A value we put (our
  advert, a cache) goes to the `copies` closest servers, not all k (issue 43: upkeep at 10,000).
- P34 a py-libp2p server drops, in silence, a peer's ADD_PROVIDERs past 10 in 10 s: every provide of
  ours waits its turn at each server (`node.p2p.pacing.ProvidePacer`, the server's own numbers).
- libp2p's GET_PROVIDERS returns an empty list both for "no providers" and for a server that refused
  the request (reset the stream, answered garbage): `lookup_providers` sends its own request and
  records each failure, so `peers` and `submit` can say a gate refused rather than "nobody" (issue 15).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, final

import trio
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from multiaddr import Multiaddr

from node.p2p.closest import ClosestServers
from node.p2p.host import Host
from node.p2p.kadlink import LONE_QUERY_S, QUERY_TIMEOUT_S, KadLink, serves_kad
from node.p2p.kadwire import add_provider_request, answer_of, get_providers_request, put_value_request
from node.p2p.looktime import no_delay
from node.p2p.pacing import PROVIDES_PER_WINDOW, WINDOW_S, ProvidePacer
from node.p2p.places import Places, places_for
from node.p2p.places import network_of as place_network
from node.p2p.shortlist import K, Shortlist, holding, key_distance
from node.p2p.walk import Answer, Walked, walk_providers

log = logging.getLogger(__name__)

WRITES_IN_FLIGHT: Final = 3
"""Writes (ADD_PROVIDER, PUT_VALUE) in flight at once, to the closest servers already known (py-libp2p
sends 10). Not a walk's alpha (`node.p2p.shortlist.ALPHA`, 10): a read waits on its requests, a refresh's
writes are waited on by no one, and each server's turn is paced apart (P34)."""
WALKED_ADDRS_TTL_S: Final = 600  # the addresses of a peer a walk met, kept to dial it (libp2p's walk too)
ADVERT_COPIES: Final = 5
"""Servers that keep a copy of our advert (a cache; provider records go to all k): a PUT_VALUE and its
echo are each about 1 KB, and k copies were most of a worker's upkeep with every reachable device serving."""
SENDER: ContextVar[tuple[str | None] | None] = ContextVar("kad_sender", default=None)
"""The remote address of the inbound kad stream this task serves, as the kernel gave it (`(None,)`: the
connection has none); None outside a kad request (our own provides, libp2p's cache of a lookup)."""


@dataclass(frozen=True)
class ProviderLookup:
    """Providers of a key and how the lookup went.

    Attributes:
        providers: peer id -> its known multiaddrs.
        answered: servers that answered (with or without providers).
        failures: server peer id -> why it gave no answer (refused the key, reset, timed out).
        keys: how many keys were asked.
        holds: how many providers the key holds, as most of the networks of its holders that answered
            say (`node.p2p.shortlist.holding`): what a placement and a lookup read "full" by, never
            the union of the lists, which any one holder fills (`node.p2p.dht`).
    """

    providers: dict[str, list[str]]
    answered: int
    failures: dict[str, str]
    keys: int = 1
    holds: int = 0
    ours: bool = True
    """A writer's read-back (`Kad.provide_where_missing`): False when holders on more than half of the
    networks that answered do not list us (`node.p2p.shortlist.holding`); one honest holder among
    hostile ones does not make it True, nor does half of them make it False."""


@final
class Kad:
    """A running kad-dht on our host: raw puts, gets, provides and lookups on byte keys."""

    def __init__(self, dht: Any, host: Host, server: bool) -> None:
        self._dht = dht
        self._host = host
        self.server = server
        self.link = KadLink(dht, host)
        """Our requests to the servers (`node.p2p.kadlink`)."""
        self.closest = ClosestServers()
        """The servers closest to each key we announce, reused by refreshes (issue 43)."""
        self.places: Places = places_for(None)
        """Records of a key this server keeps from one network (`node.p2p.places`; the node sets it)."""
        self.circuits: tuple[str, ...] = ()
        """Our circuit addresses through the gates that hold a relay slot for us (a relayed worker's;
        its advertiser sets them): announced in our provider records after our own addresses, so that a
        reader that finds no advert at a server (a foreign gate keeps no `/sark/` values) can still dial
        us (`Node._advert_from_peer`)."""
        # P34: a py-libp2p server keeps so many ADD_PROVIDERs of one peer a window (its own numbers)
        self.pacer = ProvidePacer(
            int(getattr(dht, "_provider_rate_max", PROVIDES_PER_WINDOW)),
            float(getattr(dht, "_provider_rate_window", WINDOW_S)),
        )

    async def bootstrap(self, peer_ids: list[str]) -> None:
        """Add connected gates to the routing table and look ourselves up (P20)."""
        for peer in peer_ids:
            # A gate is a server by configuration: add it before identify has told us so.
            await self._dht.routing_table.add_peer(ID.from_base58(peer), skip_server_mode_check=True)
        await self._dht.peer_routing.refresh_routing_table()

    def routing_table_peers(self) -> list[str]:
        """The peers in our routing table (DHT servers only, P11)."""
        return [p.to_base58() for p in self._dht.routing_table.get_peer_ids()]

    @property
    def raw(self) -> Any:
        """The libp2p `KadDHT`, for the tests that pin its behaviour."""
        return self._dht

    def routing_table_size(self) -> int:
        """Peers in our routing table."""
        return int(self._dht.get_routing_table_size())

    def walk_due(self, key: bytes) -> bool:
        """Would our next announcement of `key` walk (`ClosestServers.due`)?"""
        return self.closest.due(key, self.routing_table_size())

    def bound_providers(self, bound: Callable[[bytes], int]) -> None:
        """Keep at most `bound(key)` providers per key on this server (libp2p has one global cap), and at
        most `places.per_network` per key from one network (`node.p2p.places`, issue 50)."""
        store = self._dht.provider_store
        add = store.add_provider

        def bounded(key: bytes, provider: Any) -> None:
            # Expired records hold no place: libp2p drops them only from its maintenance loop.
            held = {str(i.peer_id) for i in store.get_providers(key)}
            peer = str(provider.peer_id)
            if len(held) >= bound(key) and peer not in held:
                log.debug("key %s full (%d providers): %s not kept", key.hex()[:12], len(held), peer)
                return
            sender = SENDER.get()
            if sender is not None and not self.places.admit(key, peer, sender[0], held):
                log.debug(
                    "key %s holds %d records from %s: %s not kept",
                    key.hex()[:12], self.places.per_network, place_network(sender[0]), peer,
                )  # fmt: skip
                return
            add(key, provider)

        store.add_provider = bounded

    async def put(self, key: str, value: bytes, copies: int = K) -> None:
        """Store a value under a `/sark/...` key locally and at its `copies` closest servers
        (`ClosestServers`)."""
        key_bytes = key.encode()
        self._dht.validator.validate(key, value)
        self._dht.value_store.put(key_bytes, value)
        # libp2p republishes the values it put itself from its maintenance loop (every 600 s: a walk and
        # k PUT_VALUEs of its own, signed records and all): our worker puts again on its own timer, to
        # `copies` servers, so the key is not libp2p's to republish.
        self._dht.value_store.local_keys.discard(key_bytes)
        record, _ = self._dht.value_store.store[key_bytes]
        request = put_value_request(key_bytes, record)

        async def send(peer: ID) -> bool:
            # Only a failed send counts as a failure: py-libp2p 0.8.1 echoes PUT_VALUEs it stored in a
            # form its own client reads as False, and resets one whose record is not newer than its own.
            await self.link.send(peer, request, reply=True)
            return True

        await self._at_closest(key_bytes, send, copies)

    async def get_local(self, key: str) -> bytes | None:
        """The value we hold ourselves, if any."""
        record = self._dht.value_store.get(key.encode())
        return None if record is None else bytes(record.value)

    def drop_local(self, key: str) -> None:
        """Forget our copy of a value (an expired or invalid advert)."""
        self._dht.value_store.remove(key.encode())

    async def get(self, key: str) -> list[bytes]:
        """Every value held for a key: ours, then each server's (unvalidated: the caller checks them).

        One direct GET_VALUE to each of the k closest servers in our routing table, concurrently, for
        as long as `KadLink.ask_servers` waits; nothing else. libp2p's own `get_value` is no fallback: when
        none answered (a server that stalls the stream, as a hostile one near the key may), it walked
        the same servers again under none of these deadlines (30 s against one stalling gate, where
        this returns after `LONE_QUERY_S`). A reader with no value asks the worker itself
        (its ask over `/sark/profile`: `Node.look`, `submit`'s probe).
        """
        key_bytes = key.encode()
        values: list[bytes] = []
        local = self._dht.value_store.get(key_bytes)
        if local is not None:
            values.append(bytes(local.value))

        async def ask(peer: ID) -> None:
            record = await self._dht.value_store._get_from_peer(peer, key_bytes, return_record=True)
            if record is not None and record.value:
                values.append(bytes(record.value))

        await self.link.ask_servers(key_bytes, ask)
        return values

    async def provide(self, key: bytes) -> bool:
        """Announce ourselves as a provider of a raw key (ADD_PROVIDER is fire-and-forget, P9) at its
        closest servers, walked for only when `ClosestServers` says so. Not libp2p's `provide`: it walks
        every time, and its `providing_keys` would walk again on libp2p's own republish timer."""
        me, addrs = self._dht.host.get_id(), self._announced()
        self._dht.provider_store.add_provider(key, PeerInfo(me, addrs))
        request = add_provider_request(key, me, addrs)

        async def send(peer: ID) -> bool:
            await self.link.send(peer, request, reply=False)  # fire-and-forget, as libp2p and Kubo send it
            return True

        return await self._at_closest(key, send, paced=lambda _: True) > 0

    def _announced(self) -> list[Multiaddr]:
        """The addresses our provider records carry: the host's own, then our circuits."""
        own = list(self._dht.host.get_addrs())
        return own + [c for c in map(Multiaddr, self.circuits) if c not in own]

    async def provide_where_missing(self, key: bytes, *, refresh: bool = False) -> ProviderLookup:
        """Read our record of `key` back from its k closest servers and send it again to each that
        answered without listing us (`refresh`: to each that answered, as a refresh does); the
        providers they listed, all together, how many the key holds as most of their networks say
        (`ProviderLookup.holds`), and `ProviderLookup.ours` False when holders on more than half of
        their networks do not list us.

        Each writer sends to the k closest its own walk found, and in a young swarm those views differ:
        a key's holders list different writers, and a reader's walk that stopped waiting at holders that
        agree (`walk.AGREED`) could miss a writer they all lack. This walk waits for every holder: it
        reaches the k closest the readers reach, and later refreshes go to those (`ClosestServers.walked`).
        """
        me = self._dht.local_peer_id
        walked = await self._walk(key, 10**6, agree=False)
        if not walked.closest:
            return await self.lookup_providers(key, 10**6)
        holders = [p for p in walked.closest if p in walked.lists]  # those that answered
        self.closest.walked(key, tuple(p.to_base58() for p in holders), self.routing_table_size())
        lacking = set(walked.lacking(me))
        request = add_provider_request(key, me, self._announced())

        due = set(holders) if refresh else lacking

        async def send(peer: ID) -> bool:
            if peer in due:
                await self.link.send(peer, request, reply=False)
            return True

        await self._at_closest(key, send, paced=due.__contains__, walked=holders)
        stored = self._dht.provider_store.get_providers(key) if self.server else []
        listed: dict[str, list[str]] = {
            p.to_base58(): [] for p in [*walked.providers, *(i.peer_id for i in stored)]
        }
        ours = holding((self.link.network(p), int(me not in walked.lists[p])) for p in holders) == 0
        return ProviderLookup(listed, walked.answered, walked.failures, holds=walked.holds, ours=ours)

    async def _at_closest(
        self,
        key: bytes,
        send: Callable[[ID], Awaitable[bool]],
        copies: int = K,
        paced: Callable[[ID], bool] = lambda _: False,
        walked: list[ID] | None = None,
    ) -> int:
        """`send` to the key's `copies` closest servers (alpha at once), reused or walked for (`walked`:
        the ones a walk of the caller's just found, not counted as a reuse); how many took it. A send
        to a server `paced` names first waits its turn there (P34), outside the request's deadline."""
        if walked is not None:
            peers = walked
        elif self.closest.reuse(key, self.routing_table_size()) is None:
            peers = await self._dht.peer_routing.find_closest_peers_network(key)
            peers = [p for p in peers if p != self._dht.local_peer_id]
            # libp2p's walk falls back to connected and peerstore peers while its table is small, other
            # workers (clients) too: each refused the write, was dropped, and the list too short made
            # every refresh walk again. Servers that identify showed serve kad only, when we know any.
            peers = [p for p in peers if serves_kad(self._dht.host, p)] or peers
            self.closest.walked(key, tuple(p.to_base58() for p in peers), self.routing_table_size())
        else:  # with the servers of our table nearer the key than the farthest kept (a growing swarm)
            distance = key_distance(key)
            table = [p.to_base58() for p in self._dht.routing_table.find_local_closest_peers(key, K)]
            mine = self._dht.local_peer_id.to_base58()
            nearer = self.closest.nearer(
                key, [p for p in table if p != mine], lambda p: distance(ID.from_base58(p))
            )
            peers = [ID.from_base58(p) for p in nearer]
        peers = peers[:copies]  # closest first: the walk's order, kept by `ClosestServers`
        took: list[ID] = []
        limit = trio.Semaphore(WRITES_IN_FLIGHT)

        async def one(peer: ID) -> None:
            if paced(peer):
                await self.pacer.turn(peer.to_base58())
            async with limit:
                with trio.move_on_after(QUERY_TIMEOUT_S):
                    try:
                        if await send(peer):
                            took.append(peer)
                    except Exception:  # libp2p's stream errors: this server did not take it
                        log.debug("kad write to %s failed", peer, exc_info=True)

        async with trio.open_nursery() as nursery:
            for peer in peers:
                nursery.start_soon(one, peer)
        failed = tuple(p.to_base58() for p in peers if p not in took)
        if failed:
            self.closest.failed(key, failed)  # left or refused: dropped; too few left and we walk again
        return len(took)

    async def find_providers(self, key: bytes, count: int = 200) -> dict[str, list[str]]:
        """Providers of a raw key from the servers, never only the local cache, de-duplicated (P9).

        Returns:
            peer id -> its known multiaddrs.
        """
        return (await self.lookup_providers(key, count)).providers

    async def lookup_providers(
        self,
        key: bytes,
        count: int = 200,
        *,
        walk: bool = True,
        every: bool = False,
        run_delay: Callable[[], float] = no_delay,
    ) -> ProviderLookup:
        """Providers of a key, and which servers answered or failed (a refusal is never silent).

        With at most k servers in our table (each holds every record) those we know (`_ask_known`);
        with more (a large swarm) a walk (`_walk`). `walk` False: the servers we know only (no walk
        however large the table). `every`: no count of answers ends the read while one of the key's k
        closest (the servers we know, in a small swarm) may still answer (`Shortlist`'s `every`): a look's
        second read of a key whose first listed providers that did not answer (`Dht.lookup`).
        `run_delay`: a look's (`node.p2p.looktime`): the waits are then its own seconds, the machine's
        waits for a CPU given back (`node.p2p.walk`).
        """
        store = self._dht.provider_store
        infos: list[Any] = list(store.get_providers(key)) if self.server else []
        if walk and self.routing_table_size() > K:  # a large swarm: walk to the key's holders
            walked = await self._walk(key, count, every=every, run_delay=run_delay)
            found = [*infos, *walked.providers.values()]
            return self._found(found, walked.answered, walked.failures, count, walked.holds)
        return await self._ask_known(key, count, infos, run_delay, every=every)

    async def _ask_known(
        self, key: bytes, count: int, infos: list[Any], run_delay: Callable[[], float], *, every: bool = False
    ) -> ProviderLookup:
        """Providers of a key from the servers we know (`infos`: our own records of it), all asked at once
        until `count` providers are each listed by servers on more networks than the servers still to
        answer (`Shortlist.vouched`); the providers come in the walk's turns, one from each network that
        listed any (`Shortlist.ranked`). Before, the first `count` distinct providers ended the asks and
        were kept in the order they came, so a stranger's DHT server that answered first with 20 Sybils (a
        full key's count) ended every read of a key with no honest provider
        (`tests/labs/swarm/test_hostile_first.py`). A server that stalled past the wait
        (`KadLink.ask_servers`) is a failure ("no answer within"), as one that refused: libp2p's own
        iterative lookup, which this fell back to when none answered, asked the same stalling servers
        again under none of the walk's rules (`node.p2p.shortlist`: agreement across networks, a
        bounded round count).
        """
        failures: dict[str, str] = {}
        asked: set[str] = set()
        done: set[str] = set()
        listed: dict[ID, list[Any]] = {}  # each provider a server listed -> its records, as they came
        state: Shortlist[ID] = Shortlist((), lambda _: 0, count, None, agreed=1, network=self.link.network)

        async def ask(peer: ID) -> None:
            asked.add(peer.to_base58())
            try:
                got = await self.link.get_providers(peer, key)
            except Exception as exc:
                failures[peer.to_base58()] = f"{type(exc).__name__}: {exc}"[:200]
                raise
            for info in got:
                listed.setdefault(info.peer_id, []).append(info)
            state.answered(peer, frozenset(i.peer_id for i in got), ())
            done.add(peer.to_base58())

        def enough(pending: int) -> bool:
            return not every and state.vouched(pending) >= count

        answered = await self.link.ask_servers(key, ask, enough, run_delay)
        stalled = asked - done - failures.keys()
        if not enough(len(stalled)):  # the rest were not cut short by enough answers: they stalled
            waited = QUERY_TIMEOUT_S if answered else LONE_QUERY_S
            for peer in stalled:
                failures[peer] = f"no answer within {waited:g} s"
        infos.extend(info for peer in state.ranked(listed) for info in listed[peer])
        return self._found(infos, answered, failures, count, state.holds(every=True))

    async def _walk(
        self,
        key: bytes,
        count: int,
        *,
        agree: bool = True,
        short: bool = False,
        every: bool = False,
        run_delay: Callable[[], float] = no_delay,
    ) -> Walked:
        """A GET_PROVIDERS walk (`node.p2p.walk`) from the closest servers of our routing table
        (`short`: the rule before issue 50, for a lab's side-by-side only; `every` as `walk_providers`)."""
        me = self._dht.local_peer_id
        start = [p for p in self._dht.routing_table.find_local_closest_peers(key, K) if p != me]

        async def ask(peer: ID) -> Answer:
            async with self.link.limit(peer):
                providers, closer = answer_of(await self.link.request(peer, get_providers_request(key)))
            closer = [(p, a) for p, a in closer if p != me.to_bytes() and a]
            for raw, addrs in closer:  # to dial them next, as libp2p's own walk does
                self._dht.host.get_peerstore().add_addrs(ID(raw), addrs, WALKED_ADDRS_TTL_S)
            return Answer([PeerInfo(ID(p), a) for p, a in providers], [PeerInfo(ID(p), a) for p, a in closer])

        network = self.link.network
        return await walk_providers(
            key,
            start,
            ask,
            count,
            QUERY_TIMEOUT_S,
            agree=agree,
            network=network,
            short=short,
            run_delay=run_delay,
            every=every,
        )

    @staticmethod
    def _found(
        infos: list[Any], answered: int, failures: dict[str, str], count: int, holds: int
    ) -> ProviderLookup:
        """Providers de-duplicated (P9), their addresses merged, at most `count`."""
        found: dict[str, list[str]] = {}
        for info in infos:
            addrs = found.setdefault(info.peer_id.to_base58(), [])
            addrs.extend(str(a) for a in info.addrs if str(a) not in addrs)
        return ProviderLookup(dict(list(found.items())[:count]), answered, failures, holds=holds)

    async def providers_at(self, peer_id: str, key: bytes) -> set[str] | None:
        """The providers one server lists for a key, or None when it did not answer."""
        with trio.move_on_after(QUERY_TIMEOUT_S):
            try:
                infos = await self.link.get_providers(ID.from_base58(peer_id), key)
            except Exception:  # libp2p's stream and parse errors: this server did not answer
                log.debug("GET_PROVIDERS at %s failed", peer_id, exc_info=True)
                return None
            return {i.peer_id.to_base58() for i in infos}
        return None


__all__ = [
    "ADVERT_COPIES", "WALKED_ADDRS_TTL_S", "WRITES_IN_FLIGHT", "K", "Kad", "ProviderLookup",
]  # fmt: skip
