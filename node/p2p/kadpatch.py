"""libp2p's kad-dht, patched and opened: the workarounds that change how libp2p's own DHT behaves.

Workarounds (py-libp2p 0.8.1, shared/notes/libp2p.md):

- P12 `KadDHT(protocol_prefix=...)` is ignored on the wire: `PROTOCOL_ID` is imported by value into five
  modules, so `patch_kad` sets it in each to `/sark/kad/1.0.0` before any DHT is built.
- P10/P12 records live for days (providers 48 h, values 24 h): `patch_kad` sets our lifetime; workers
  re-announce on a timer (`node.p2p.node`).
- P8/T4 updates need `select()` and un-namespaced keys are stored unvalidated: a strict
  `NamespacedValidator` with our `/sark/` validator, `strict_validation=True` on the DHT too.
- P11 a server adds every peer that opens a kad stream to its routing table, client-mode peers too, and
  hands them out as "closer peers": lookups then dial peers that refuse kad, and the real servers fall
  out of the k closest. `_ServerOnlyKadDHT` admits such a peer only once identify lists our kad protocol.
- P23 a kad server resets every inbound kad stream beyond 12 in flight, host-wide: a lookup of 20
  adverts at once lost 8 of them. Servers get `INBOUND_KAD_STREAMS` (clients keep at most
  `node.p2p.kadlink.QUERIES_PER_SERVER` streams open to one server). Those tokens are held while libp2p
  waits, with no deadline, for a request: each must come within `FIRST_FRAME_S` of the stream's
  opening or of our last answer (`PacedStream`), so silent streams cannot take them all (issue 23).
  A stream that asks again within each `FIRST_FRAME_S` is not silent, and libp2p reset every stream
  past the tokens: a stranger's `INBOUND_KAD_STREAMS` paced streams denied the server to every walk
  (issue 50). A stream that finds them all taken ends the one held longest, once it is older than
  `EVICT_AFTER_S` (`_ServerOnlyKadDHT.handle_stream`).
- P24 a provider store keeps at most k (20) providers per key and silently ignores the rest: with
  more than 20 workers, discovery found 20. `patch_kad` lifts the per-key cap to `PROVIDERS_PER_KEY`
  (a GET_PROVIDERS answer of 10,000 providers is ~1 MB, inside the 4 MiB message cap); the sharded
  keys are bounded per key by `Kad.bound_providers`.
- py-libp2p's server puts each listed peer's signed peer record (~215 B, learnt from identify) beside
  its id and addresses in every FIND_NODE and GET_PROVIDERS answer: 20 closer peers an answer, two
  thirds of a walk's bytes, and every provider of a hot key (issue 43: walks were a third of a
  device's upkeep with every reachable device serving). Standard kad-dht servers (go, js) send none,
  and our lookups read the addresses only: `open_kad` has the host's peerstore hand the DHT no record
  (`get_peer_record`, which only the DHT's answers and gossipsub, unused, call).
- A peer whose every address failed is refused for a while (a negative cache): `forget_failed_dials`.
- libp2p's maintenance loop refreshes the routing table every 600 s with a walk for our own id and one
  more for a random id in every non-empty bucket: about ten walks at 6,000 servers, 1.6 KB/s a device,
  more than everything else it sends (issue 43). `_ServerOnlyKadDHT` walks for our own id only, every
  `ROUTING_REFRESH_S`: the buckets far from us fill from the answers of that walk, of our refreshes'
  walks and of lookups, and libp2p's pinger still evicts peers that stopped answering.

The queries on the running DHT (direct asks, bounded keys, reused closest servers) are `node.p2p.kad`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, final

import trio
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.records.pubkey import PublicKeyValidator
from libp2p.records.validator import NamespacedValidator, Validator
from libp2p.tools.anyio_service import background_trio_service

from node.p2p.host import Host
from node.p2p.kad import SENDER, Kad
from node.p2p.kadlink import serves_kad
from node.p2p.stream import FIRST_FRAME_S, PacedStream, remote_ip
from protocol import KAD

log = logging.getLogger(__name__)

KAD_MODULES: Final = ("common", "kad_dht", "peer_routing", "provider_store", "value_store")
NAMESPACE: Final = "sark"
INBOUND_KAD_STREAMS: Final = 128
"""Concurrent inbound kad streams a server accepts, host-wide (libp2p: 12, P23)."""
EVICT_AFTER_S: Final = 5.0
"""How long an inbound kad stream is held before a newcomer that finds every token taken may end it.

Ours ask once a stream and close it within a second (`node.p2p.kadlink.KadLink.request`); go's and
js's reuse a stream for their next request and open another when it was closed. The cheater's view:
it chooses how many streams it opens and how often each asks, and a paced stream kept its token for
as long as it asked; the eviction reads only how long each stream has held its token, so holding is
worth nothing past this age: to keep every token it must open them anew faster than `tokens /
EVICT_AFTER_S` a second (26 a second for 128), each a negotiation the server answers, a flood that
costs it what it costs the server, not a slot held."""
PROVIDERS_PER_KEY: Final = 10_000
"""Providers a server keeps per key (libp2p: k = 20, P24): every worker of a large swarm is found."""
ROUTING_REFRESH_S: Final = 1200
"""How often the routing table is refreshed by a walk for our own id (libp2p: 600 s, a walk per bucket)."""


def patch_kad(record_ttl_s: float) -> None:
    """Put the DHT on `/sark/kad/1.0.0` and give records our short lifetime (P12, P10)."""
    for name in KAD_MODULES:
        module = importlib.import_module(f"libp2p.kad_dht.{name}")
        module.PROTOCOL_ID = TProtocol(KAD)  # type: ignore[attr-defined]
    provider_store = importlib.import_module("libp2p.kad_dht.provider_store")
    value_store = importlib.import_module("libp2p.kad_dht.value_store")
    common = importlib.import_module("libp2p.kad_dht.common")
    kad_dht = importlib.import_module("libp2p.kad_dht.kad_dht")
    ttl, half = max(1, int(record_ttl_s)), max(1, int(record_ttl_s / 2))
    for module, name, value in (
        (provider_store, "PROVIDER_RECORD_EXPIRATION_INTERVAL", ttl),
        (provider_store, "PROVIDER_RECORD_REPUBLISH_INTERVAL", half),
        (value_store, "DEFAULT_TTL", ttl),
        (value_store, "REPUBLISH_INTERVAL", half),
        (common, "DEFAULT_TTL", ttl),
        (common, "TTL", ttl),
        (provider_store, "BUCKET_SIZE", PROVIDERS_PER_KEY),  # only the per-key provider cap reads it (P24)
        (kad_dht, "ROUTING_TABLE_REFRESH_INTERVAL", ROUTING_REFRESH_S),  # its maintenance loop's period
    ):
        setattr(module, name, value)


def answer_without_peer_records(host: Host) -> None:
    """Our kad answers list peers by id and addresses only, as go and js do: the peerstore gives the DHT
    no signed peer record to copy into them (py-libp2p 0.8.1 adds one, ~215 B, to every peer listed)."""
    host.raw.get_peerstore().get_peer_record = lambda peer_id: None


def forget_failed_dials(host: Host, peer_id: str) -> None:
    """Let libp2p dial a peer again at once (a gate that restarted).

    py-libp2p 0.8.1 keeps a negative cache of peers whose every address failed and refuses to dial
    them for a while ("recently failed all addresses (negative cache)"): a worker could not rejoin a
    restarted gate until it expired. Used by `node.p2p.node` before each reconnect; pinned by
    tests/labs/faults/test_gates.py.
    """
    host.raw.get_network().unblock_peer(ID.from_base58(peer_id))


def kad_protocol_ids() -> dict[str, str]:
    """The protocol id each patched libp2p kad module will use (for the test that pins P12)."""
    return {n: str(importlib.import_module(f"libp2p.kad_dht.{n}").PROTOCOL_ID) for n in KAD_MODULES}


@final
class _RecordValidator(Validator):
    """Adapts our checks (`validate(key, value)`, `select(key, values)`) to libp2p's Validator."""

    def __init__(
        self, validate: Callable[[str, bytes], None], select: Callable[[str, list[bytes]], int]
    ) -> None:
        self._validate = validate
        self._select = select

    def validate(self, key: str, value: bytes) -> None:
        self._validate(key, value)

    def select(self, key: str, values: list[bytes]) -> int:
        return self._select(key, values)


@final
class _ServerOnlyKadDHT(KadDHT):
    """P11: keep client-mode peers out of the routing table (and so out of "closer peers")."""

    async def add_peer(self, peer_id: ID, *, skip_server_mode_check: bool = False) -> bool:
        # libp2p passes skip_server_mode_check=True for any peer that opened a kad stream to us.
        if skip_server_mode_check and not serves_kad(self.host, peer_id):
            return False
        return bool(await super().add_peer(peer_id, skip_server_mode_check=skip_server_mode_check))

    async def refresh_routing_table(self) -> None:
        # libp2p's walks for our own id and a random id in every non-empty bucket (ten at 6,000
        # servers); its maintenance loop calls this every ROUTING_REFRESH_S. Our own id only.
        for peer_id in await self.peer_routing.find_closest_peers_network(self.local_peer_id.to_bytes()):
            try:
                addrs = self.host.get_peerstore().addrs(peer_id)
            except Exception:  # libp2p's PeerStoreError: a peer whose addresses expired, skipped as it does
                continue
            if addrs:
                await self.routing_table.add_peer(PeerInfo(peer_id, addrs))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: dict[Any, tuple[float, trio.CancelScope]] = {}  # each stream holding a token

    async def handle_stream(self, stream: Any) -> None:
        # libp2p reads a kad stream's requests with no deadline while it holds one of the server's
        # INBOUND_KAD_STREAMS tokens: silent streams would take them all. Each request must come in time.
        # The connection's remote address, for the places each network may hold under a key (issue 50).
        if self.mode == DHTMode.CLIENT:
            await stream.close()
            return
        SENDER.set((remote_ip(stream),))
        paced, scope = PacedStream(stream, FIRST_FRAME_S), trio.CancelScope()
        limiter = self._inbound_limiter
        wait = 1.0 if limiter.borrowed_tokens < limiter.total_tokens or self._evict_oldest() else 0
        with trio.move_on_after(wait):  # an evicted stream gives its token back as its handler unwinds
            await limiter.acquire_on_behalf_of(paced)
            self._held[paced] = (trio.current_time(), scope)
        if paced not in self._held:
            await _reset(stream)  # every token held, none past EVICT_AFTER_S: libp2p's own answer
            return
        try:
            with scope:
                # PacedStream is no INetStream subclass: it delegates every call to the one it wraps
                await self._do_handle_stream(paced)  # type: ignore[arg-type]
            if scope.cancelled_caught:
                await _reset(stream)
        finally:
            self._held.pop(paced, None)
            limiter.release_on_behalf_of(paced)

    def _evict_oldest(self) -> bool:
        """End the inbound kad stream that has held its token longest, if past `EVICT_AFTER_S` (its
        handler is cancelled: a reset alone does not wake py-libp2p's pending read)."""
        if not self._held:
            return False
        oldest, (since, scope) = min(self._held.items(), key=lambda item: item[1][0])
        if trio.current_time() - since < EVICT_AFTER_S:
            return False
        self._held.pop(oldest, None)
        scope.cancel()
        return True


async def _reset(stream: Any) -> None:
    try:
        await stream.reset()
    except Exception:  # libp2p's stream errors: a stream already gone is ended
        log.debug("kad stream reset failed", exc_info=True)


@asynccontextmanager
async def open_kad(
    host: Host,
    mode: Literal["server", "client"],
    record_ttl_s: float,
    validate: Callable[[str, bytes], None],
    select: Callable[[str, list[bytes]], int],
) -> AsyncIterator[Kad]:
    """Run a kad-dht on `/sark/kad/1.0.0` with a strict `/sark/` validator while the block runs."""
    patch_kad(record_ttl_s)
    answer_without_peer_records(host)
    validator = NamespacedValidator(
        {"pk": PublicKeyValidator(), NAMESPACE: _RecordValidator(validate, select)}, strict_validation=True
    )
    dht_mode = DHTMode.SERVER if mode == "server" else DHTMode.CLIENT
    dht = _ServerOnlyKadDHT(host.raw, dht_mode, validator=validator, strict_validation=True)
    if mode == "server":
        dht._inbound_limiter = trio.CapacityLimiter(INBOUND_KAD_STREAMS)  # P23
    async with background_trio_service(dht):
        await trio.lowlevel.checkpoint()
        yield Kad(dht, host, mode == "server")


async def become_server(kad: Kad, bound: Callable[[bytes], int]) -> None:
    """Turn a client-mode DHT into a server (a worker a dial-back reached, `dht_mode = "reachable"`).

    libp2p's `switch_mode` registers the kad handler (our paced one, P23) but not the inbound limiter
    `open_kad` gives a server, and peers learn that we serve kad only from identify: we push it to
    every connected peer (P11). A push alone puts us in nobody's routing table: py-libp2p admits a
    peer when it opens a kad stream (go-libp2p-kad-dht also on identify's protocol updates), so
    until our next refresh, minutes away, every table would hold the gates alone and the swarm's
    records and lookups stay on them. So we walk for our own id at once, as a joining Kademlia node
    does: each server the walk asks admits us, those closest to our id first (P32).
    """
    if kad.server:
        return
    dht = kad.raw
    dht._inbound_limiter = trio.CapacityLimiter(INBOUND_KAD_STREAMS)  # P23
    kad.bound_providers(bound)
    await dht.switch_mode(DHTMode.SERVER)
    kad.server = True
    await dht.host._push_identify_to_all_peers()
    await dht.refresh_routing_table()  # P32: one walk for our own id; the servers it asks admit us


__all__ = [
    "EVICT_AFTER_S",
    "INBOUND_KAD_STREAMS",
    "KAD_MODULES",
    "PROVIDERS_PER_KEY",
    "ROUTING_REFRESH_S",
    "answer_without_peer_records",
    "become_server",
    "forget_failed_dials",
    "kad_protocol_ids",
    "open_kad",
    "patch_kad",
]
