"""The network of `swarm_sim.py`: message sizes, kad ids, servers' routing tables, iterative walks.

Model (stated, not measured):
- Kademlia: 64-bit XOR ids (sha256 of peer id or key), k = 20, alpha = 13 (the node's walk,
  `node.p2p.shortlist.ALPHA`; py-libp2p and go-libp2p-kad-dht use 10; `Swarm.alpha` for a side-by-side;
  libp2p's FIND_NODE walks at py-libp2p's own, 10: they were at 3 before, an undercount), each
  routing-table bucket holds k servers drawn at random from its id range; iterative lookups, alpha
  requests in flight; a GET_PROVIDERS walk runs
  the node's walk state (`node.p2p.shortlist.Shortlist`: the next server drawn among the k closest
  known; a departed server leaves the k closest once its request timed out, `Shortlist.failed`;
  it ends at the count, or when the k closest it knows were asked and answered, or, once
  three holders agree, when every request still open has been out longer than the walk's round
  trip; before issue 50 also at three holders listing the same providers and none more,
  `Swarm.short`, which hostile servers near a key used).
- Latency: each request's RTT drawn from a lognormal, median 80 ms, sigma 0.6 (p95 ~ 215 ms, a
  wide-area mix); answers also take their bytes at 20 Mbit/s. Servers do not queue (their load is
  counted, not fed back).
- Message sizes: libp2p's kad protobuf `Message`, filled with a real Ed25519 peer id, real multiaddrs
  and a real signed advert of the node's codec (`measure_sizes`).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import random
import sys
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

from kit.data import make_profile  # type: ignore[import-not-found,unused-ignore]  # noqa: E402  (the lab's profile)
from libp2p.crypto.ed25519 import create_new_key_pair  # noqa: E402
from libp2p.kad_dht.common import ALPHA as LIBP2P_ALPHA  # noqa: E402
from libp2p.kad_dht.pb.kademlia_pb2 import Message  # noqa: E402
from libp2p.peer.id import ID  # noqa: E402
from libp2p.peer.peerstore import create_signed_peer_record  # noqa: E402
from libp2p.records.record import make_signed_put_record  # noqa: E402
from multiaddr import Multiaddr  # noqa: E402

from node.p2p.dht import advert_key, capability_dht_key  # noqa: E402
from node.p2p.kadlink import QUERY_TIMEOUT_S  # noqa: E402
from node.p2p.kadwire import add_provider_request, put_value_request  # noqa: E402
from node.p2p.shards import SHARD_CAP  # noqa: E402
from node.p2p.shortlist import (  # noqa: E402  (ALPHA: the node's walk, 13)
    AGREED,
    ALPHA,
    HOP_S,
    K,
    Shortlist,
)
from protocol import DOMAIN_ADVERT, AdvertBody, seal  # noqa: E402
from protocol.codec import pack_body  # noqa: E402
from protocol.records import peer_id_from_public_key, public_key_of  # noqa: E402

RTT_MEDIAN_S, RTT_SIGMA = 0.080, 0.6
BANDWIDTH_BPS = 20e6
OUT = ROOT / "benchmarks" / "out"
OPEN_RTTS = 1.0
"""Round trips of one kad request on a connection already up, measured on real hosts of this code
(`conn_cost.py`, the slope over two delays, 12 rounds: 1.02, the protocol negotiated in the request's
own flight, `node.p2p.lazy`; 3.03 through py-libp2p's `new_stream`, which waits for multistream's two
echoes first, as `KadLink.request` did before)."""
CONNECT_RTTS = 4.4
"""Round trips a new connection adds before that (`conn_cost.py`: 5.42 in all against 1.02 open:
TCP, multistream for the security protocol, Noise XX, multistream for the muxer)."""
CONNECT_BYTES = 527
"""Bytes a new connection adds, both ways (`conn_cost.py`: Noise's handshake and the negotiations)."""
TABLES_KEPT = 50_000
"""Routing-table answers a `Swarm` keeps (the Sybil runs walk the same keys from the same start often)."""
STREAM_BYTES = 790
"""A kad request's stream on the wire beyond its messages, both ways (multistream-select of the protocol,
yamux frames and window updates, a noise frame per write): measured on loopback by `swarm_check.py`
(`calibrate`, TCP payload bytes by `ss`): 787 B for a GET_PROVIDERS, 643 B for an ADD_PROVIDER; the
larger is used for every request (an estimate from the frames alone was 254 B)."""


@dataclass(frozen=True)
class Sizes:
    """Bytes on the wire of each kad message, from libp2p's protobuf and the node's own encoders.

        "libp2p's" is py-libp2p 0.8.1's message (the node's before issue 43's upkeep work: our signed peer
        record in every request, twice in an ADD_PROVIDER); "slim" is what the node sends now
        (`node.p2p.kad.add_provider_request`, `put_value_request`) and how our servers list peers in answers
    (`node.p2p.kadpatch.answer_without_peer_records`).
    """

    peer: int  # one peer entry (id + 2 addrs) with its signed peer record, as py-libp2p lists it
    peer_slim: int  # the same entry without the record (as our servers list peers now; go, js)
    key_request: int  # a request carrying a key and our signed peer record (libp2p's walk, FIND_NODE)
    request_slim: int  # a request carrying only a key (our GET_PROVIDERS)
    advert: int  # libp2p's PUT_VALUE of our signed advert (sender record, signed put record)
    advert_slim: int  # ours: the same record, no sender record
    put_echo: int  # a server's answer to a PUT_VALUE: the record echoed, its own sender record
    provide: int  # libp2p's ADD_PROVIDER: sender record, our entry with its record
    provide_slim: int  # ours: our id and addresses only
    provide_echo: int  # a py-libp2p server's answer to an ADD_PROVIDER (type and key)
    stream: int  # a request's stream, both ways: multistream-select, yamux and noise frames (measured)

    def answer(self, closer: int, providers: int, slim: bool = False) -> int:
        """An answer's bytes: `closer` peers and `providers` (`slim`: from our servers, no records)."""
        entry = self.peer_slim if slim else self.peer
        return self.key_request + (closer + providers) * entry

    def write(self, slim: bool) -> tuple[int, int]:
        """One refresh copy, request and answer with the stream: (the advert's PUT, one ADD_PROVIDER)."""
        put = (self.advert_slim if slim else self.advert) + self.put_echo + self.stream
        return put, (self.provide_slim if slim else self.provide) + self.provide_echo + self.stream


def measure_sizes(addrs: int = 2) -> Sizes:
    """Serialize real messages: a real peer id, `addrs` multiaddrs (with the `/p2p/` suffix libp2p's
    peerstore keeps), the signed peer record py-libp2p 0.8.1 attaches to peer entries (`signedRecord`)
    and requests and answers (`senderRecord`), a signed advert of a lab profile in a signed put record;
    the node's own ADD_PROVIDER and PUT_VALUE encoders for the slim sizes."""
    pair = create_new_key_pair()
    pid = ID.from_pubkey(pair.public_key)
    ips = ("203.0.113.7", "10.0.0.7", "192.168.1.7", "172.16.0.7")[:addrs]
    maddrs = [Multiaddr(f"/ip4/{ip}/tcp/40123/p2p/{pid}") for ip in ips]
    record = create_signed_peer_record(pid, maddrs, pair.private_key).marshal_envelope()
    slim = Message.Peer(id=pid.to_bytes(), addrs=[a.to_bytes() for a in maddrs])
    entry = Message.Peer(id=pid.to_bytes(), addrs=[a.to_bytes() for a in maddrs], signedRecord=record)
    key = capability_dht_key(None)
    request = Message(type=Message.MessageType.GET_PROVIDERS, key=key)
    seed = pair.private_key.to_bytes()[:32]
    signer = peer_id_from_public_key(public_key_of(seed))
    body = AdvertBody(peer_id=signer, seq=1, issued_at=0.0, expires_at=300.0, profile=make_profile())
    akey = advert_key(signer).encode()
    put_record = make_signed_put_record(akey, pack_body(seal(body, DOMAIN_ADVERT, seed)), pair.private_key)
    put_slim = put_value_request(akey, put_record)
    echo = Message(type=Message.MessageType.PUT_VALUE, key=akey, senderRecord=record)
    echo.record.CopyFrom(put_record)
    echo.record.timeReceived = "2026-11-25T08:57:31.236045000Z"
    provide_slim = add_provider_request(key, pid, maddrs)
    provide = Message(type=Message.MessageType.ADD_PROVIDER, key=key, senderRecord=record)
    provide.providerPeers.append(entry)
    return Sizes(
        peer=Message(closerPeers=[entry]).ByteSize(),
        peer_slim=Message(closerPeers=[slim]).ByteSize(),
        key_request=request.ByteSize() + len(record) + 4,
        request_slim=request.ByteSize() + 2,
        advert=len(put_slim) + len(record) + 4,
        advert_slim=len(put_slim) + 2,
        put_echo=echo.ByteSize() + 2,
        provide=provide.ByteSize() + 2,
        provide_slim=len(provide_slim) + 2,
        provide_echo=Message(type=Message.MessageType.ADD_PROVIDER, key=key).ByteSize() + 1,
        stream=STREAM_BYTES,
    )


def kad_id(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


@dataclass
class Swarm:
    """Servers (sorted 64-bit ids, a dead flag for departed ones) and the lookup traffic per server."""

    ids: np.ndarray
    dead: np.ndarray
    rng: np.random.Generator
    direct: bool
    slim: bool
    """Our servers: closer peers listed without signed peer records, our requests without ours."""
    load: Counter[int] = field(default_factory=Counter)
    lists: dict[int, dict[int, frozenset[int]]] = field(default_factory=dict)
    """A key -> what each of its holders lists (`writers_lists`), once per key."""
    alpha: int = ALPHA
    """A GET_PROVIDERS walk's requests in flight (the node's `ALPHA`; `swarm_sim.py` runs 3 beside it);
    libp2p's FIND_NODE walks keep py-libp2p's own (10)."""
    agreed: int = AGREED
    """Holders listing the same providers that end a lookup's walk (`Shortlist`'s `agreed`)."""
    short: bool = False
    """Holders that agree may end a walk short of its count (`Shortlist`'s `short`: the rule before
    issue 50, which hostile servers near a key used; `swarm_hostile.py`'s baseline)."""
    network: Callable[[int], Hashable] | None = None
    """A server's network, so that agreement counts distinct networks (`Shortlist`'s `network`)."""
    keep_failed: bool = False
    """Departed servers stay among a walk's k closest once their request failed (`Shortlist`'s
    `keep_failed`: the rule before; now they leave it and the next live server is asked)."""
    every: bool = False
    """A walk waits for every one of the k closest within its hop (`Shortlist`'s `every`), where the
    node's rule lets networks that outnumber those still to answer end it (`swarm_hostile.py`,
    `swarm_sim.py`: side by side)."""
    connections: bool = False
    """Each request costs the round trips measured on real hosts (`OPEN_RTTS`), and one to a server
    the asker holds no connection to (`connected`) `CONNECT_RTTS` more and `CONNECT_BYTES`; False:
    one round trip a request, the model before (`swarm_sim.py` runs both side by side)."""
    connected: set[int] = field(default_factory=set)
    """The servers the asker of the lookup running holds a connection to (`begin_lookup` resets it)."""
    instant: frozenset[int] = frozenset()
    """Servers that answer at once (hostile ones choosing their timing: `swarm_hostile.py`)."""
    gates: frozenset[int] = frozenset()
    """The gates' ids: every asker holds a connection to each."""
    tables: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    """`table`'s answers, kept (a pure function of the ids; `TABLES_KEPT` at most)."""

    def begin_lookup(self) -> None:
        """A fresh asker (a submitter's first lookup): connected to the gates only."""
        self.connected = set(self.gates)

    def trip(self, server: int) -> tuple[float, int]:
        """One request's time to `server` (alive) and the bytes its connection adds, connecting if new."""
        if server in self.instant:
            return 0.0, 0
        if not self.connections:
            return rtt(self), 0
        new = server not in self.connected
        self.connected.add(server)
        return rtt(self) * (OPEN_RTTS + (CONNECT_RTTS if new else 0.0)), CONNECT_BYTES if new else 0

    @classmethod
    def build(cls, live: list[int], stale: int, rng: np.random.Generator, slim: bool) -> Swarm:
        departed = rng.integers(0, 2**63, size=stale, dtype=np.uint64) * np.uint64(2)
        ids = np.concatenate([np.array(live, dtype=np.uint64), departed])
        order = np.argsort(ids)
        dead = np.concatenate([np.zeros(len(live), bool), np.ones(stale, bool)])
        return cls(ids[order], dead[order], rng, direct=len(live) <= K, slim=slim)

    def holders(self, key_id: int) -> set[int]:
        """The k live servers closest to a key: where its records are."""
        alive = self.ids[~self.dead]
        near = np.argpartition(alive ^ np.uint64(key_id), min(K, len(alive) - 1))[:K]
        return {int(x) for x in alive[near]}

    def table(self, owner: int, target: int) -> list[int]:
        """The k entries of `owner`'s routing table closest to `target` (its bucket, filled at random)."""
        kept = self.tables.get((owner, target))
        if kept is None:
            if len(self.tables) >= TABLES_KEPT:
                self.tables.clear()
            kept = self.tables[owner, target] = self._table(owner, target)
        return kept

    def _table(self, owner: int, target: int) -> list[int]:
        cpl = 64 - (owner ^ target).bit_length() if owner != target else 63
        span = 63 - min(cpl, 63)
        out: list[int] = []
        # the target's bucket, then the deeper ones (ours), then ever farther buckets: a table's k closest
        # to a target come from wherever it has entries (a start near the target has a near-empty bucket)
        buckets = [(target >> span, span), (owner >> span, span)]
        buckets += [((target >> s) ^ 1, s) for s in range(span + 1, 64)]
        for prefix, width in buckets:
            lo = int(np.searchsorted(self.ids, np.uint64(prefix << width), "left"))
            hi = int(np.searchsorted(self.ids, np.uint64(((prefix + 1) << width) - 1), "right"))
            pool = self.ids[lo:hi]
            rng = np.random.default_rng((owner ^ (prefix << 1)) & (2**63 - 1))
            pick = pool if len(pool) <= K else pool[rng.choice(len(pool), K, replace=False)]
            out.extend(int(x) for x in pick if int(x) != owner)
            if len(out) >= K:
                break
        return out[: 2 * K]

    def is_dead(self, server: int) -> bool:
        i = int(np.searchsorted(self.ids, np.uint64(server)))
        return bool(self.dead[i])


@dataclass(frozen=True)
class Walk:
    """One iterative lookup: when it ended, whether it reached a holder, its bytes, the k closest."""

    t: float
    found: bool
    bytes: int
    closest: tuple[int, ...]
    asked: int = 0
    """Requests sent (a walk's hops, alpha at a time)."""
    providers: frozenset[int] = frozenset()
    """The providers the holders it asked listed."""
    kept: tuple[int, ...] = ()
    """The first `SHARD_CAP` of them in the walk's rank (`Shortlist.ranked`): what `Kad` keeps of a key."""
    holds: int = 0
    """How many providers the key holds as most of its holders' networks say (`Shortlist.holds`): what
    a placement reads "full" by."""


def walk(
    swarm: Swarm,
    sizes: Sizes,
    start: int,
    target: int,
    holders: set[int] | dict[int, frozenset[int]] | None,
    n: int,
    count: int = SHARD_CAP,
) -> Walk:
    """Iterative Kademlia lookup from `start`. A GET_PROVIDERS walk (`holders`: the key's, each listing
    the same `n` providers; or each holder -> the providers it lists, as its writers' own walks chose
    it, `writers_lists`) runs the node's own walk state (`node.p2p.shortlist.Shortlist`: the next server
    drawn among the k closest known, ending at the count a lookup asks per key, at `AGREED` holders
    listing the same providers, or when the k closest known were asked; a request past `HOP_S` frees
    its slot), with our slim requests; libp2p's FIND_NODE walk (`holders` None) asks closest first
    until the k closest answered. `count`: the providers that end a lookup (a placement's read asks
    for every one, `node.p2p.dht.EVERY_PROVIDER`)."""
    lookup = holders is not None
    hop = HOP_S if lookup else math.inf  # libp2p's FIND_NODE walk holds a slot until the deadline
    alpha = swarm.alpha if lookup else LIBP2P_ALPHA  # libp2p's own walk: its alpha, 10
    draw = random.Random(int(swarm.rng.integers(2**32))) if lookup else None
    count = count if lookup else 2**31
    state = Shortlist(
        swarm.table(start, target), lambda p: p ^ target, count, draw,
        agreed=swarm.agreed, short=swarm.short, network=swarm.network, keep_failed=swarm.keep_failed,
        every=swarm.every,
    )  # fmt: skip
    same = frozenset(range(-n, 0))  # a holder's providers (negative: never a server's id)
    lists = holders if isinstance(holders, dict) else dict.fromkeys(holders or (), same)
    flight: list[tuple[float, float, int]] = []  # (answered or failed at, sent at, server)
    now, sent = 0.0, 0
    extra = 0  # bytes of the new connections

    def exchange(peer: int) -> int:
        """One request and its answer on the wire, carried by `peer`: its bytes."""
        answer = sizes.answer(K, len(lists.get(peer, ())), swarm.slim)
        request = sizes.request_slim if lookup and swarm.slim else sizes.key_request
        swarm.load[peer] += request + answer
        return request + sizes.stream + answer

    while True:
        for peer in state.next(alpha - sum(1 for _, at, _ in flight if now < at + hop)):
            if swarm.is_dead(peer):
                rtt_s = QUERY_TIMEOUT_S
            else:
                rtt_s, connecting = swarm.trip(peer)
                extra += connecting
            heapq.heappush(flight, (now + rtt_s, now, peer))
        if state.done({p: now - at for _, at, p in flight}, hop):
            # requests still open were sent and are answered on the wire, read or not (`swarm_check`
            # measured the node's: a lookup of 20 at 3.8 x the bytes modelled when these were left out)
            sent += sum(exchange(p) for _, _, p in flight if not swarm.is_dead(p))
            found = frozenset(p for p in state.found if isinstance(p, int))
            kept = tuple(state.ranked(sorted(found)))[:SHARD_CAP]
            closest, asked = tuple(state.closest()), len(state.asked)
            return Walk(now, state.held, sent + extra, closest, asked, found, kept, state.holds())
        freed = min((at + hop for _, at, _ in flight if now < at + hop), default=math.inf)
        if freed < flight[0][0]:  # a request past its hop bound frees its slot (`node.p2p.shortlist.HOP_S`)
            now = freed
            continue
        now, at, peer = heapq.heappop(flight)
        if swarm.is_dead(peer):  # its deadline passed: it leaves the k closest (`Shortlist.failed`)
            state.failed(peer)
            continue
        bytes_ = exchange(peer)
        now += (bytes_ - sizes.stream) * 8 / BANDWIDTH_BPS
        sent += bytes_
        state.answered(peer, lists.get(peer, frozenset()), swarm.table(peer, target), now - at)


def writers_lists(swarm: Swarm, sizes: Sizes, target: int, writers: list[int]) -> dict[int, frozenset[int]]:
    """Each live server -> the writers that wrote to it: each writer sends to the k closest its own
    FIND_NODE walk from its id found (`node.p2p.kad._at_closest`), so views that differ leave a key's
    holders listing different writers. The walks' traffic is not counted as lookup load."""
    load = swarm.load.copy()
    lists: dict[int, set[int]] = {}
    for writer in writers:
        for server in walk(swarm, sizes, writer, target, None, 0).closest:
            if not swarm.is_dead(server):
                lists.setdefault(server, set()).add(writer)
    swarm.load = load
    return {server: frozenset(w) for server, w in lists.items()}


def rtt(swarm: Swarm) -> float:
    return float(swarm.rng.lognormal(np.log(RTT_MEDIAN_S), RTT_SIGMA))


__all__ = [
    "ALPHA", "BANDWIDTH_BPS", "CONNECT_BYTES", "CONNECT_RTTS", "OPEN_RTTS", "OUT", "ROOT", "Sizes",
    "Swarm", "Walk",
    "kad_id", "make_profile", "measure_sizes", "rtt", "walk", "writers_lists",
]  # fmt: skip
