"""Our kad requests to DHT servers: one request and its answer, and the k closest servers asked at once.

`node.p2p.kad` decides what to ask and whom (a read, a walk, a write to the closest); this module is
how a request reaches one server and comes back:

- one request on a stream of its own, the protocol negotiated in the request's own flight
  (`node.p2p.lazy`: one round trip, not three), the answer read with libp2p's size bound;
- P23 (client side): at most `QUERIES_PER_SERVER` kad streams open to one server;
- P41: a connection whose muxer opens no stream while it still counts as open is closed and dialled
  again, once for every request that met it (`KadLink._repair`);
- P42: past the pruning mark, room is made before a walk's dial (`Host.make_room`);
- the network (/24, /64) each server's connection reached, which a walk's agreement counts
  (`node.p2p.shortlist`), never the addresses the server announces;
- the k closest servers we know asked at once under a lookup's deadlines (`QUERY_TIMEOUT_S`, or
  `LONE_QUERY_S` while none has answered), a stalling server a failure like a refusing one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, final

import trio
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.common import MAX_DHT_MESSAGE_SIZE
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited

from node.errors import error_chain
from node.p2p.host import Host, broken
from node.p2p.kadwire import get_providers_request, providers_of
from node.p2p.lazy import open_lazily
from node.p2p.looktime import no_delay, within
from node.p2p.shortlist import K
from node.p2p.stream import remote_ip
from protocol import KAD
from scheduler.verification import network_of

log = logging.getLogger(__name__)

QUERIES_PER_SERVER: Final = 8
"""Concurrent kad streams a lookup opens to one server."""
REPAIRS_KEPT_S: Final = 60.0
"""How long `KadLink._repair` remembers closing a broken connection to a server (requests that met it
began within their deadline, seconds before)."""
QUERY_TIMEOUT_S: Final = 3.0
"""Deadline of one direct kad request while another server has answered (a dead server must not hold
a lookup up)."""
LONE_QUERY_S: Final = 10.0
"""How long direct requests wait while no server has answered yet: on a loaded machine (load 12 on
two cores in the suite at load 4) an honest gate can take longer than `QUERY_TIMEOUT_S`, and with
none answered there is nothing to go on without it; a caller's own deadline cuts it shorter."""
CLOSE_S: Final = 1.0
"""The most a request's stream takes to close, even when its walk was cancelled (`Dht.lookup` ends a
look with the first walks that fill it): with the streams of a cut walk left open, the next lookup of
all providers in the same swarm missed some (`tests/labs/swarm/test_shards.py`, 5 runs of 8)."""


def serves_kad(host: Any, peer_id: ID) -> bool:
    """Has identify told us that this peer serves our kad protocol (a DHT server)?"""
    try:
        protocols = host.get_peerstore().get_protocols(peer_id)
    except Exception:  # libp2p raises PeerStoreError for a peer it has no entry for
        return False
    return KAD in {str(p) for p in protocols or ()}


@dataclass
class _Repair:
    """`KadLink._repair`'s record of one server: when we last closed a broken connection to it, and the
    lock its requests take to close one."""

    at: float = -math.inf
    lock: trio.Lock = field(default_factory=trio.Lock)


@final
class KadLink:
    """Our kad requests to the servers of a running kad-dht (`dht`, libp2p's `KadDHT`) on our host."""

    def __init__(self, dht: Any, host: Host) -> None:
        self._dht = dht
        self._host = host
        self._per_server: dict[ID, trio.Semaphore] = {}
        self._repairs: dict[ID, _Repair] = {}  # a server -> our last close of a broken connection to it
        self.networks: dict[ID, str] = {}
        """Each server's network as our last request reached it (`network`)."""

    def network(self, peer: ID) -> str:
        """A server's network as our last request to it reached it (its /24 or /64,
        `scheduler.verification.network_of`; "" unknown: every unknown server is one network), never
        the addresses it announces: a walk's agreement counts networks (`node.p2p.shortlist`)."""
        return self.networks.get(peer, "")

    def limit(self, peer: ID) -> trio.Semaphore:
        """The streams we may open to one server at once (`QUERIES_PER_SERVER`, P23)."""
        limit = self._per_server.get(peer)
        if limit is None:
            limit = self._per_server[peer] = trio.Semaphore(QUERIES_PER_SERVER)
        return limit

    async def request(self, peer: ID, request: bytes) -> bytes:
        """One kad request on a new stream and its answer, the protocol negotiated in the request's
        own flight (`node.p2p.lazy`: one round trip, not three); raises when either fails.

        P41, as `Host._new_stream` does it: a connection whose muxer opens no stream while it still
        counts as open ("Failed to create stream to peer"), or that broke under the negotiation, is
        closed and dialled again, once (`_repair`). Before, a look's eight asks at once to its gate all
        failed on such a connection and the look found no worker (beside a loaded suite run,
        `tests/labs/swarm/test_shards.py`: "0 answered, 8 keys, failures {gate: SwarmException: Failed to
        create stream to peer ...}")."""
        first = encode_uvarint(len(request)) + request
        began = trio.current_time()
        await self._host.make_room(peer.to_base58())  # P42: a walk's burst of dials past the mark
        try:
            stream = await open_lazily(self._dht.host, peer, KAD, first)
        except Exception as exc:
            if not any(broken(e) for e in error_chain(exc)):
                raise
            await self._repair(peer, began)
            stream = await open_lazily(self._dht.host, peer, KAD, first)
        self.networks[peer] = network_of(remote_ip(stream) or "")
        try:
            return bytes(await read_varint_prefixed_bytes_limited(stream, MAX_DHT_MESSAGE_SIZE))
        finally:
            with trio.move_on_after(CLOSE_S) as closing:
                closing.shield = True  # a walk cancelled mid-read ends its stream still
                await stream.close()

    async def send(self, peer: ID, request: bytes, *, reply: bool) -> None:
        """One kad request on a new stream (raises when it cannot be sent); with `reply`, the answer is
        awaited and dropped, a reset one too (py-libp2p resets a PUT_VALUE not newer than its own)."""
        stream = await self._dht.host.new_stream(peer, [TProtocol(KAD)])
        try:
            await stream.write(encode_uvarint(len(request)) + request)
            if reply:
                try:
                    await read_varint_prefixed_bytes_limited(stream, MAX_DHT_MESSAGE_SIZE)
                except Exception:  # libp2p's stream errors: the request went out, the answer is not judged
                    log.debug("kad answer from %s not read", peer, exc_info=True)
        finally:
            await stream.close()

    async def get_providers(self, peer: ID, key: bytes) -> list[Any]:
        """One GET_PROVIDERS at one server; raises when it refused or failed.

        libp2p's own call returns an empty list for a refusal (a server that resets the stream on a
        key it cannot read) as for "no providers": discovery must tell the two apart.
        """
        reply = await self.request(peer, get_providers_request(key))
        return [PeerInfo(ID(provider), addrs) for provider, addrs in providers_of(reply)]

    async def ask_servers(
        self,
        key: bytes,
        ask: Callable[[ID], Awaitable[None]],
        enough: Callable[[int], bool] = lambda _: False,
        run_delay: Callable[[], float] = no_delay,
    ) -> int:
        """Run `ask` at the k closest servers we know, concurrently, until `enough(pending)` (the
        servers still to answer or fail), every one has answered or failed, or the time is up:
        `QUERY_TIMEOUT_S`, or, while none has answered, the first answer within `LONE_QUERY_S`
        (seconds of a look's own with its `run_delay`, `node.p2p.looktime`). Returns how many answered."""
        closest = self._dht.routing_table.find_local_closest_peers(key, K)
        closest = [p for p in closest if p != self._dht.local_peer_id]
        # Peers identify has shown to serve kad first; the rest only when we know of none (P11).
        peers = [p for p in closest if serves_kad(self._dht.host, p)] or closest
        answered, pending, first = 0, len(peers), trio.Event()
        if not peers:
            return 0

        async def one(peer: ID) -> None:
            nonlocal answered, pending
            try:
                async with self.limit(peer):
                    try:
                        await ask(peer)
                        answered += 1
                        first.set()
                    except Exception:  # libp2p's stream and parse errors: this server did not answer
                        log.debug("kad query to %s failed", peer, exc_info=True)
            finally:
                pending -= 1
                if pending == 0 or enough(pending):  # every server answered or failed, or enough did
                    nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for peer in peers:
                nursery.start_soon(one, peer)
            await within(QUERY_TIMEOUT_S, run_delay, trio.sleep_forever)
            await within(LONE_QUERY_S - QUERY_TIMEOUT_S, run_delay, first.wait)
            nursery.cancel_scope.cancel()
        return answered

    async def _repair(self, peer: ID, since: float) -> None:
        """Close our broken connection to `peer` once for every request that met it: a request whose
        attempt began before the last repair goes again on the connection that repair left (its next
        stream dials anew), so that asks at once do not close each other's fresh connection. One lock a
        server: a server whose close stalls (at most `Host.disconnect`'s 2 s) holds up no other's."""
        repair = self._repairs.setdefault(peer, _Repair())
        async with repair.lock:
            if repair.at >= since:
                return
            log.info("the connection to %s broke opening a kad stream: dialled again", peer)
            await self._host.disconnect(peer.to_base58())
            repair.at = now = trio.current_time()
            kept = {p: r for p, r in self._repairs.items() if now - r.at < REPAIRS_KEPT_S or r.lock.locked()}
            self._repairs = kept


__all__ = [
    "CLOSE_S", "LONE_QUERY_S", "QUERIES_PER_SERVER", "QUERY_TIMEOUT_S", "REPAIRS_KEPT_S", "KadLink",
    "serves_kad",
]  # fmt: skip
