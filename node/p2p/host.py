"""Our libp2p host: where the libp2p workarounds live (with `node.p2p.kadpatch`, `.kad` and `.stream`).

Each workaround names the py-libp2p 0.8.1 behaviour it replaces (see shared/notes/libp2p.md, P-numbers):

- P6 plaintext accepted: `sec_opt` is Noise only (a plaintext dialer is refused).
- P2 250 ms per dial: `max_connections_per_peer=1` ends the happy-eyeballs wait at the first connection.
- P1 a handler exception kills the host: the swarm-level stream handler is guarded, so *every* protocol
  (ours, kad, relay, identify) is covered; our handlers are further wrapped with a deadline and a
  per-peer in-flight cap answered with `Busy` (P22: yamux stalls the 257th stream instead of refusing).
- P3 nothing has a deadline: every dial, stream open and handler runs under one.
- P4 EOF is an exception: `LibStream.read` returns `b""` (`node.p2p.stream`, with the handler guards).
- P14 relay addresses: the swarm never dials `/p2p-circuit`; `open_channel` dials circuits explicitly.
- T16 relay abuse: libp2p reserves a slot for any peer, and for whatever peer id the request names;
  `node.p2p.relay.GateRelay` reserves only for the Noise-authenticated caller, and only if
  `relay_allow` lists it.
- P15 shutdown: `host.close()` on exit so remotes see us leave at once.
- T9 below our protocols: a connection that never finishes its Noise + yamux handshake (garbage, a
  4 GiB multistream header, one byte a second) is cut after `HANDSHAKE_TIMEOUT_S` (libp2p: 10 s).
- P18 logging: libp2p's logger is routed through ours at WARNING, not Python's last-resort handler.
- P25 bulk throughput: yamux cuts every write into 64 KiB frames and answers every read with a
  WINDOW_UPDATE; per frame, pure-Python muxing costs more than the bytes. Frames may be as large as
  the receiver's window (the yamux spec bounds a frame by the window, not by 64 KiB; go-yamux and
  py-libp2p read them), so writes go out in frames of up to `YAMUX_FRAME`, and window credit is
  returned in half-window batches (go-yamux's hysteresis; `PY_YAMUX_RELEASE_ON_READ=0`, which a user
  may still override). /sark/blob went from 0.33 to above 0.5 of an HTTP download (benchmarks/).
- P27 a zoo of exception types: libp2p raises its own (BaseLibp2pError and subclasses), plain
  `Exception`s (resource manager), OSError, trio's and multiaddr's; `map_exceptions` is the one place
  that turns them into `PeerUnreachable` (`node.errors.map_exceptions`, around every libp2p call
  here), so no caller ever sees a libp2p type.
- P26 negative dial cache: once every address of a peer failed, libp2p refuses to dial it again for
  60 s ("recently failed all addresses"), so a gate or worker that restarts stays unreachable for a
  minute. Every caller here paces its own retries (gate rounds, fetch rounds, discovery rounds), so
  an explicit dial first clears the peer from that cache.
- P28 stale addresses: libp2p dials at most one address per transport class, the first its peerstore
  lists (kept for minutes), so a peer back on a new port was dialled at its dead old one. An explicit
  dial replaces the peer's addresses with the one being tried, each given address in turn, each but
  the last under a short deadline (`node.p2p.dial`: a dead first address held the whole deadline).
- P31 a wrong peer id: when the peer at an address has another id than the dialled `/p2p/<id>`,
  Noise raises `PeerIDMismatchesPubkey`, which carries the id that answered only in its message,
  wrapped three deep under "unable to connect to <id>, no addresses established a successful
  connection". `_dial_one` finds it in the chain and raises `PeerIdMismatch` with both ids.
- P29 wildcards: libp2p reports `/ip4/0.0.0.0` as it is; `addrs_factory` gives `addrs.announced`
  instead. Its observed addresses are off: they carry our outbound connections' ephemeral ports.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final, final

import multiaddr
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.io.exceptions import IncompleteReadError
from libp2p.network.config import ConnectionConfig
from libp2p.network.exceptions import SwarmException
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.protocol_muxer.exceptions import MultiselectCommunicatorError
from libp2p.rcmgr.connection_limits import ConnectionLimits
from libp2p.rcmgr.manager import ResourceLimits
from libp2p.relay.circuit_v2.protocol import PROTOCOL_ID as HOP_ID
from libp2p.relay.circuit_v2.transport import CircuitV2Transport
from libp2p.security.noise.exceptions import PeerIDMismatchesPubkey
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux import yamux as yamux_module
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_ID
from libp2p.stream_muxer.yamux.yamux import Yamux
from libp2p.tools.anyio_service import background_trio_service
from libp2p.transport.exceptions import SecurityUpgradeFailure

from node.errors import (
    ClosedAtHandshake,
    PeerIdMismatch,
    PeerTimeout,
    PeerUnreachable,
    error_chain,
    map_exceptions,
)
from node.p2p.addresscap import AddressCappedManager, per_address_default
from node.p2p.addrs import AddressBook, parse_multiaddr, peer_of, without_p2p
from node.p2p.dial import Sightings, dial_in_turn, dial_plan
from node.p2p.identity import load_seed
from node.p2p.relay import GATE_RESERVATIONS, GateRelay, refusal, relay_config
from node.p2p.stream import FIRST_FRAME_S, LibStream, guarded_handler, refuse, remote_ip, run_handler
from node.p2p.wire import Channel, Handler

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS: Final = (str(NOISE_ID),)
"""The only security protocol our hosts offer or accept (P6)."""
_ANSWERED: Final = re.compile(r"remote_peer_id_from_pubkey=(\w+)")
"""P31: where `PeerIDMismatchesPubkey`'s message names the id that answered."""
HANDSHAKE_TIMEOUT_S: Final = 5.0
"""Deadline of an inbound connection's security and muxer upgrade."""
MAX_PENDING: Final = 64
"""Handshakes a host lets run at once, in and out (py-libp2p's own default)."""
NODE_CONNECTIONS: Final = 512
"""A worker's or a submitter's connection cap (P33; a worker's ready line says it): a real `join` at
this cap held 58.2 KiB a connection, about 29 MiB (`benchmarks/gate_cap.py --role worker`)."""
GATE_CONNECTIONS: Final = 2048
"""A gate's connection cap by default (`gate --max-connections`, P33): a worker holds one or two
connections to each of its gates (its own dial, and the gate's when it dials back or relays), so about
1,000 workers a gate; about 134 MiB at 67 KiB a connection. Past it the gate closes a new connection
before its handshake, which the dialler's `gates.cause` names, and says so once in its log."""


PRUNE_FROM: Final = 0.75
"""P42: a worker or a submitter holding this share of its cap closes idle connections, down to
`PRUNE_TO`, at most 20 a pass (py-libp2p's pruner: never one with a stream open, one younger than
`PRUNE_GRACE_S`, nor a protected peer's: our gates). A walk asks about 30 DHT servers
(`benchmarks/swarm_hostile.py`), a look reads several keys, a worker rewalks its keys and a serving
worker is asked by everyone's walks, each over a connection of its own, and nothing closed them: at 512
every dial fails ("Maximum connections limit reached"), the dial to a worker with a task as much as a
kad request (an estimate from the simulator's walks; no swarm here is large enough to fill a cap).

The cheater's view: an open stream is the other side's to keep. An inbound stream counts from its
opening until its handler returns, and multistream waits 10 s for a stream that names no protocol
(py-libp2p's `inbound_stream_protocol_negotiation_timeout`); a stranger that opens its next stream
before its last ends, keeps one that never ends (libp2p's ping: a 32-byte ping within every 10 s; a
serving worker's kad: a request within every `FIRST_FRAME_S`), or reconnects within `PRUNE_GRACE_S`, is
never pruned, whatever each protocol's deadline. So the pruner closes what nobody holds, and nothing
rests on it against a stranger: the address bounds it, not the stream. An address holds at most its
share of inbound connections (`node.p2p.addresscap`: 32 of 512), and past the cap a connection is
closed before its handshake (P33): 16 addresses at most (an IPv6 /64 holds any number) fill a worker's
or a submitter's cap, each connection a Noise handshake and a stream every 10 s, for as long as the
stranger pays. While full, no new peer reaches the host and its own dials fail (a submitter not yet
connected offers it nothing); what it holds lives on (its gates, a task's stream). Without pruning,
idle connections filled it for a handshake each. A connection we dialled counts in no address's share:
a stranger's DHT servers that our walks dial may hold those so, as many as our walks choose of them
(the k closest to each key walked), not as many as it runs."""
PRUNE_TO: Final = 0.5
"""The share of its cap a worker's or a submitter's pruning closes idle connections down to (P42)."""
PRUNE_GRACE_S: Final = 20.0
"""How young a connection is never closed to make room (py-libp2p's own `GRACE_PERIOD`): one dialled
for a request is used within it."""


class _ReadTap:
    """A libp2p stream that keeps the bytes read from it (a relay's answer to a reservation)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.taken = bytearray()

    async def read(self, n: int | None = None) -> bytes:
        data: bytes = await self._stream.read(n)
        if len(self.taken) < 4096:
            self.taken += data
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def broken(exc: BaseException) -> bool:
    """Whether an error opening a stream says the connection itself is broken (P41)."""
    if isinstance(exc, MultiselectCommunicatorError):
        return True
    return isinstance(exc, SwarmException) and str(exc).startswith("Failed to create stream to peer")


@dataclass(frozen=True)
class HostConfig:
    """How to build a host.

    Attributes:
        key_file: the persistent Ed25519 seed (mode 0600); None for a throwaway identity.
        listen: multiaddrs to listen on; read the bound ports back with `Host.addrs()`.
        relay_hop: serve circuit relay v2 hop (the gate) with `node.p2p.relay.relay_limits`.
        relay_allow: the peers that may reserve a relay slot here (None: any peer).
        relay_reservations: the relay slots a gate holds at once.
        max_connections: connection cap of the whole host, in and out (P33: py-libp2p's pruning mark and
            its resource manager's inbound bound are set to it).
        max_per_address: inbound connections one address may hold (None: `per_address_default`).
        max_streams: stream cap of the whole host.
        first_frame_s: how long an inbound stream of ours may take to send its first whole frame.
        prune_idle: close idle connections past `PRUNE_FROM` of the cap (P42; a gate does not: a NAT'd
            worker's relay slot lives on a connection that carries nothing between circuits).
        prune_grace_s: the age under which no connection is closed to make room (`PRUNE_GRACE_S`).
    """

    key_file: Path | None
    listen: tuple[str, ...] = ("/ip4/127.0.0.1/tcp/0",)
    relay_hop: bool = False
    relay_allow: frozenset[str] | None = None
    relay_reservations: int = GATE_RESERVATIONS
    max_connections: int = 512
    max_per_address: int | None = None
    max_streams: int = 4096
    first_frame_s: float = FIRST_FRAME_S
    prune_idle: bool = True
    prune_grace_s: float = PRUNE_GRACE_S

    def marks(self) -> tuple[int, int]:
        """py-libp2p's pruning marks for this host (P33, P42): past the high one, idle connections close
        down to the low one; a host that does not prune has its cap as its high mark (the count
        never passes it) and 0 as its low one."""
        if not self.prune_idle:
            return self.max_connections, 0
        return int(self.max_connections * PRUNE_FROM), int(self.max_connections * PRUNE_TO)


def _identity(key_file: Path | None) -> KeyPair:
    """The node's libp2p key pair from its persistent seed (`node.p2p.identity`)."""
    return create_new_key_pair(load_seed(key_file))


YAMUX_FRAME: Final = 4 << 20
"""The largest yamux data frame we write (P25); the receiver's window bounds it further."""


def _tune_yamux() -> None:
    # P25: fewer, larger frames and batched window updates: /sark/blob is bound by per-frame cost.
    yamux_module.MAX_MESSAGE_SIZE = YAMUX_FRAME
    os.environ.setdefault("PY_YAMUX_RELEASE_ON_READ", "0")


def _tame_logging() -> None:
    # P18: import sets logger "libp2p" to propagate=False with no handler, so Python's last-resort
    # handler prints its warnings raw to stderr. Route it through the application's handlers instead.
    lib = logging.getLogger("libp2p")
    lib.propagate = True
    lib.setLevel(logging.CRITICAL)  # its expected failures (refused dials, resets) are ours to report
    # P11: kad servers hand out client peers as "closer"; libp2p logs each refused kad stream at ERROR.
    logging.getLogger("libp2p.host.basic_host").setLevel(logging.CRITICAL)
    logging.getLogger("libp2p.network.auto_connector").setLevel(logging.WARNING)


@final
class Host:
    """A running libp2p host with our workarounds: build it with `open_host`.

    Attributes:
        peer_id: our peer id (base58).
        private_key: our 32-byte Ed25519 seed, for signing records.
    """

    def __init__(
        self,
        lp: Any,
        key_pair: KeyPair,
        nursery: trio.Nursery,
        relay: CircuitV2Transport,
        book: AddressBook,
        config: HostConfig,
    ) -> None:
        self._lp = lp
        self._first_frame_s = config.first_frame_s
        self._nursery = nursery
        self._relay = relay
        self._book = book
        self._inflight: dict[tuple[str, str], int] = {}
        self._prunes = config.prune_idle
        self._room = trio.Lock()  # one prune at a time: a walk's dials at once would each sort and close
        self.sightings = Sightings()  # where peers were reached or listed: dialled there first
        self.peer_id: str = lp.get_id().to_base58()
        self.private_key: bytes = key_pair.private_key.to_bytes()

    @property
    def raw(self) -> Any:
        """The libp2p host, for `node.p2p.kadpatch` and `node.p2p.kad` only."""
        return self._lp

    def addrs(self) -> list[str]:
        """The addresses we can be dialled at, ranked, each ending in `/p2p/<our id>` (P29)."""
        return [str(a) for a in self._lp.get_addrs()]

    def reached_at(self, addr: str) -> None:
        """A peer dialled us back at `addr` (a reachability check): advertise it from now on (P29)."""
        self._book.reached_at(addr)

    def set_handler(
        self, protocol: str, handler: Handler, *, max_per_peer: int = 4, deadline: float = 30.0
    ) -> None:
        """Serve `protocol` with `handler`, wrapped: deadline, per-peer cap with `Busy`, errors contained.

        Long-lived handlers pass `deadline=math.inf` and enforce their own read deadlines.
        """

        async def on_stream(stream: Any) -> None:
            peer = stream.muxed_conn.peer_id.to_base58()
            byte_stream = LibStream(stream, peer)
            key = (protocol, peer)
            if self._inflight.get(key, 0) >= max_per_peer:
                await refuse(byte_stream, f"more than {max_per_peer} {protocol} streams in flight")
                return
            self._inflight[key] = self._inflight.get(key, 0) + 1
            try:
                channel = Channel(byte_stream, peer, remote_ip=remote_ip(stream))
                await run_handler(handler, channel, deadline, self._first_frame_s)
            finally:
                self._inflight[key] -= 1
                if not self._inflight[key]:
                    del self._inflight[key]

        self._lp.set_stream_handler(TProtocol(protocol), on_stream)

    async def connect(self, addr: str, timeout: float = 10.0) -> str:
        """Connect to a `/p2p/<id>` multiaddr (direct or circuit); return the peer id."""
        peer = peer_of(addr)
        await self._ensure_connected(peer, (addr,), timeout)
        return peer

    async def open_channel(
        self,
        peer_id: str,
        protocol: str,
        *,
        addrs: Sequence[str] = (),
        timeout: float = 10.0,
        read_timeout: float = 10.0,
    ) -> Channel:
        """Open a stream: direct addresses first, then explicit circuit dials (P14).

        Raises:
            PeerUnreachable: no connection could be made.
            PeerTimeout: the connection or protocol negotiation took longer than `timeout`.
        """
        with trio.move_on_after(timeout) as scope:
            stream = await self._new_stream(peer_id, protocol, addrs, timeout)
            ip = remote_ip(
                stream
            )  # the address this connection reached: a replica's host (scheduler.verification.replicas)
            return Channel(LibStream(stream, peer_id), peer_id, read_timeout=read_timeout, remote_ip=ip)
        assert scope.cancelled_caught
        raise PeerTimeout(peer_id, f"opening {protocol}")

    async def _new_stream(self, peer_id: str, protocol: str, addrs: Sequence[str], timeout: float) -> Any:
        """A stream negotiated on our connection to the peer, dialled if need be. P41: a connection that
        broke under the negotiation (its reads or writes failed: the other side closed it, or trimmed it
        as the duplicate when both dialled at once), or whose muxer opens no stream while it still
        counts as open (py-libp2p's "Failed to create stream to peer": a CI run's embedded swarm lost
        five of six tasks so, each offer said "unreachable" on the same dead connection), is closed and
        dialled again, once. A protocol the peer refuses is no broken connection: it is said at once."""
        try:
            return await self._negotiate(peer_id, protocol, addrs, timeout)
        except PeerUnreachable as exc:
            if not any(broken(e) for e in error_chain(exc)):
                raise
            log.info("the connection to %s broke opening %s: dialled again", peer_id, protocol)
            await self.disconnect(peer_id)
        return await self._negotiate(peer_id, protocol, addrs, timeout)

    async def _negotiate(self, peer_id: str, protocol: str, addrs: Sequence[str], timeout: float) -> Any:
        await self._ensure_connected(peer_id, addrs, timeout)
        with map_exceptions(peer_id, f"cannot open {protocol}"):
            return await self._lp.new_stream(ID.from_base58(peer_id), [TProtocol(protocol)])

    def protect(self, peer_id: str, tag: str) -> None:
        """Never close our connections to `peer_id` to make room (P42): our gates. `tag` names why."""
        self._lp.get_network().protect(ID.from_base58(peer_id), tag)

    def connection_count(self) -> int:
        """The connections we hold, in and out."""
        return len(self._lp.get_network().get_connections())

    async def make_room(self, peer_id: str) -> None:
        """P42: before a dial of ours to `peer_id` (none when we hold a connection to it), past the
        pruning mark, close idle connections. py-libp2p prunes after a new connection, at most once a
        second: a look's burst of dials passed its high mark within that second and reached the cap,
        where every dial fails."""
        if not self._prunes or self.is_connected(peer_id):
            return
        network = self._lp.get_network()
        async with self._room:  # the dials that waited find the room made
            if self.connection_count() >= network.connection_config.high_watermark:
                await network.connection_pruner.maybe_prune_connections()

    def is_connected(self, peer_id: str) -> bool:
        """Do we hold a live connection to the peer?"""
        return bool(self._connections(peer_id))

    def is_relayed(self, peer_id: str) -> bool:
        """Is our connection to this peer carried by a relay (and none direct)?"""
        conns = self._connections(peer_id)
        return bool(conns) and all(str(c.get_connection_type().value) == "relayed" for c in conns)

    async def disconnect(self, peer_id: str) -> None:
        """Close our connections to a peer."""
        with trio.move_on_after(2):
            try:
                with map_exceptions(peer_id, "disconnect"):
                    await self._lp.disconnect(ID.from_base58(peer_id))
            except PeerUnreachable as exc:
                log.debug("disconnect from %s failed: %s", peer_id, exc.why)

    async def reserve_relay(self, gate_addr: str, timeout: float = 10.0) -> str:
        """Reserve a relay slot on a gate; return our circuit address through it.

        The reservation is refreshed by a task in the host's nursery for as long as the host lives.
        """
        gate = peer_of(gate_addr)
        with trio.move_on_after(timeout) as scope:
            await self._ensure_connected(gate, (gate_addr,), timeout)
            with map_exceptions(gate, "relay reservation"):
                stream = _ReadTap(await self._lp.new_stream(ID.from_base58(gate), [HOP_ID]))
                ok = await self._relay.reserve(stream, ID.from_base58(gate), self._nursery)  # type: ignore[arg-type]
            if not ok:  # py-libp2p says only False: the gate's answer says why
                raise refusal(gate, bytes(stream.taken))
            return f"{gate_addr}/p2p-circuit/p2p/{self.peer_id}"
        assert scope.cancelled_caught
        raise PeerTimeout(gate, "relay reservation")

    def _connections(self, peer_id: str) -> list[Any]:
        """Our open connections to the peer (a closed one left in the swarm's table is not one: P40)."""
        return [c for c in self._table(peer_id) if not getattr(c, "is_closed", False)]

    def _table(self, peer_id: str) -> list[Any]:
        conns = self._lp.get_network().connections.get(ID.from_base58(peer_id), [])
        return list(conns) if isinstance(conns, list | tuple) else [conns]

    def _drop_closed(self, peer_id: str) -> None:
        """P40: a connection closed whose removal from the swarm's table never came blocks every dial
        and stream to the peer ("No valid connections available"): take it out, and close its muxer in
        the background (its own close may be what hangs)."""
        network = self._lp.get_network()
        for conn in self._table(peer_id):
            if getattr(conn, "is_closed", False):
                network.remove_conn(conn)
                self._nursery.start_soon(_close_quietly, conn.muxed_conn)

    async def _ensure_connected(self, peer_id: str, addrs: Sequence[str], seconds: float) -> None:
        """A few direct addresses (seen ones, then ours first: `dial_plan`), then circuits, in turn, each
        capped (P30)."""
        self._drop_closed(peer_id)
        if not self.is_connected(peer_id):
            await self.make_room(peer_id)
            plan = dial_plan(addrs, self._book.interfaces(), self.sightings.of(peer_id))
            reached = await dial_in_turn(peer_id, plan, seconds, partial(self._dial_one, peer_id))
            self.sightings.saw(peer_id, reached)

    async def _dial_one(self, peer_id: str, addr: str | None) -> None:
        """Dial one address: a circuit through its relay (P14), or direct (None: what the peerstore knows).

        P28: libp2p dials at most one address per transport class, the first the peerstore lists
        for the peer, and keeps addresses for minutes: a peer that restarted on a new port was
        dialled at its dead old one and never at the new one (a restarted worker was labelled
        relayed by the gate's dial-back). So the peerstore's addresses for the peer are replaced
        by the one we were asked to dial (`_ensure_connected` tries each in turn).
        """
        peer = ID.from_base58(peer_id)
        circuit = addr is not None and "/p2p-circuit" in addr
        try:
            with map_exceptions(peer_id, f"circuit {addr}" if circuit else f"direct {addr or ''}".strip()):
                if addr is not None and circuit:
                    await self._relay.dial(multiaddr.Multiaddr(addr))
                    return
                if addr is not None:
                    self._lp.get_peerstore().clear_addrs(peer)
                self._lp.get_network().unblock_peer(peer)  # P26
                await self._lp.connect(PeerInfo(peer, [] if addr is None else [without_p2p(addr)]))
        except PeerUnreachable as exc:
            answered = _answered_id(exc)
            if answered is not None:
                raise PeerIdMismatch(peer_id, addr or "", answered) from exc
            if _closed_at_handshake(exc):
                raise ClosedAtHandshake(peer_id, addr or "") from exc
            raise


async def _close_quietly(muxed: Any) -> None:
    """Close a muxed connection taken out of the swarm's table, within a few seconds, whatever it says."""
    with trio.move_on_after(5), contextlib.suppress(Exception):
        await muxed.close()


def _closed_at_handshake(exc: BaseException) -> bool:
    """P33: the peer closed the connection before the security protocol was agreed (libp2p's
    `SecurityUpgradeFailure` over an `IncompleteReadError`, zero bytes where multistream's answer was
    due, or over a reset when our first bytes were still unread), as a host at its connection limit
    does (`upgrade_inbound_raw_conn`'s fast fail)."""
    chain = list(error_chain(exc))
    return any(isinstance(c, SecurityUpgradeFailure) for c in chain) and any(
        isinstance(c, IncompleteReadError | ConnectionResetError) for c in chain
    )


def _answered_id(exc: BaseException) -> str | None:
    """P31: the id of the peer that answered in another's place, when Noise's `PeerIDMismatchesPubkey`
    is in the error's chain ("" if its message no longer names it); None when it is not."""
    for current in error_chain(exc):
        if isinstance(current, PeerIDMismatchesPubkey):
            found = _ANSWERED.search(str(current))  # libp2p keeps the id in its message only
            return found.group(1) if found else ""
    return None


def _new_libp2p_host(
    key_pair: KeyPair, listen: list[multiaddr.Multiaddr], config: HostConfig, book: AddressBook
) -> Any:
    high, low = config.marks()
    connection_config = ConnectionConfig(
        max_connections_per_peer=1,  # P2: the dial-delay fix
        max_connections=config.max_connections,
        # libp2p's auto-connector dials known peers until 50-100 connections exist: off.
        min_connections=0,
        high_watermark=high,  # P33, P42: ours, not py-libp2p's 300
        low_watermark=low,
        grace_period=config.prune_grace_s,
        dial_timeout=10.0,
        inbound_upgrade_timeout=HANDSHAKE_TIMEOUT_S,
    )
    # P33: the resource manager's own bounds (256 inbound) bound before ours, and past the handshake: a
    # dialler was "connected", then closed. Ours binds first, before the handshake (the swarm's fast
    # fail at max_connections, which the dialler's `ClosedAtHandshake` names); these sit above it by
    # the handshakes that may be under way at once.
    above = config.max_connections + MAX_PENDING
    connection_limits = ConnectionLimits(
        max_pending_inbound=MAX_PENDING,
        max_pending_outbound=MAX_PENDING,
        max_established_inbound=above,
        max_established_outbound=above,
        max_established_per_peer=8,
        max_established_total=above,
    )
    limits = ResourceLimits(max_connections=above, max_streams=config.max_streams)
    return new_host(
        key_pair=key_pair,
        listen_addrs=listen,
        # P6: Noise only; the default also offers TLS, secio and /plaintext/2.0.0.
        sec_opt={NOISE_ID: NoiseTransport(key_pair, noise_privkey=create_x25519_key_pair().private_key)},
        muxer_opt={TProtocol(YAMUX_ID): Yamux},
        connection_config=connection_config,
        # one address holds at most its share of the inbound connections (a stranger's loop of fresh keys)
        resource_manager=AddressCappedManager(
            config.max_per_address or per_address_default(config.max_connections),
            exempt_loopback=config.max_per_address is None,
            limits=limits,
            enable_metrics=False,
            connection_limits=connection_limits,
            enable_memory_pooling=True,  # as new_resource_manager builds it
        ),
        addrs_factory=book.announce,  # P29
        disable_identify_address_discovery=True,  # P29: observed ephemeral ports are not addresses
    )


@asynccontextmanager
async def open_host(config: HostConfig) -> AsyncIterator[Host]:
    """Build, listen and yield a host; on exit close it so remotes see us go at once (P15).

    Raises:
        ConfigError: a loose or unreadable key file, or a bad listen address.
    """
    _tame_logging()
    _tune_yamux()
    key_pair = _identity(config.key_file)
    listen = [parse_multiaddr(a, field="listen") for a in config.listen]
    book = AddressBook()
    lp = _new_libp2p_host(key_pair, listen, config, book)
    network = lp.get_network()
    network.set_stream_handler(guarded_handler(network.common_stream_handler))  # P1, for every protocol
    async with lp.run(listen):
        try:
            async with trio.open_nursery() as nursery:
                relay = GateRelay(
                    lp, hop=config.relay_hop, allow=config.relay_allow, reservations=config.relay_reservations
                )
                async with background_trio_service(relay):
                    limits = relay_config(config.relay_hop, config.relay_reservations)
                    transport = CircuitV2Transport(lp, relay, limits)
                    yield Host(lp, key_pair, nursery, transport, book, config)
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(3):
                await lp.close()


__all__ = [
    "GATE_CONNECTIONS",
    "HANDSHAKE_TIMEOUT_S",
    "NODE_CONNECTIONS",
    "SECURITY_PROTOCOLS",
    "Host",
    "HostConfig",
    "LibStream",
    "open_host",
    "parse_multiaddr",
    "peer_of",
]
