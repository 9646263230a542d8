"""Reachability: `/sark/reach/1.0.0` dial-backs, served by gates and workers, and the check a worker runs.

py-libp2p's AutoNAT server answers "reachable" for any address (it reuses the existing connection,
P13); a second host with its own identity has no connection to reuse. Only the caller's observed IP
is ever dialled, so a dial-back cannot be used to probe third parties.

A gate of another libp2p implementation serves no `/sark/reach`: the worker then asks other sark
peers (those that asked it, then the providers of the any-worker key), each of which dials back from
a throwaway identity. The verdict is "direct" once any dial-back reached us, "relayed" only when
dial-backs were tried and all failed, and "unknown" when nobody could try.

The claimed addresses are the ones we advertise (`Host.addrs`: a wildcard listen address expanded,
P29), never `0.0.0.0`; the address a gate reached us at is what it observed of us, and the worker
advertises it too (`ReachVerdict.addr`), so "direct" always comes with an address that was dialled.

A dial-back is the prober's work (a dial, a Noise handshake), so its `PROBE_TIMEOUT_S` are the prober's
own seconds (`node.p2p.looktime.within`: real ones less the run delay of its trio thread), as a
submitter's look counts its probes, and so is the asker's wait for the answer. On real seconds a busy
gate called a reachable worker "relayed" (a CI run beside `kit.load 2`, load 5-8: a gate, a worker and
their dial-back in one test process, the reach lab of tests/labs/swarm/test_shards.py): the machine's
time, not the network's. The cheater's view: a worker cannot make the gate wait for a CPU, and one that
stalls its handshake is timed on the gate's own seconds, spent as on a quiet machine (at most
`STRETCH_MAX` times them in real time).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

import trio

from node.errors import ConfigError, NodeError, PeerTimeout, PeerUnreachable
from node.p2p.addrs import parse_multiaddr, peer_of
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.looktime import STRETCH_MAX, machine_run_delay, within
from node.p2p.wire import Channel, Handler
from protocol import REACH, ProtocolError, Reachability, ReachGet, ReachReply

log = logging.getLogger(__name__)

MAX_PROBES: Final = 4
PROBE_TIMEOUT_S: Final = 3.0
ASK_TIMEOUT_S: Final = 8.0
"""Deadline of one reach request, its dial-backs included."""
MAX_HELPERS: Final = 3
"""Sark peers asked for a dial-back when no gate serves `/sark/reach`."""
THROWAWAY_PROBES: Final = 2
"""Dial-backs a worker runs at once (each on a throwaway host)."""


def dial_back_addrs(observed_ip: str, peer_id: str, claimed: tuple[str, ...]) -> list[str]:
    """The addresses to probe: each claimed TCP port, at the IP the caller really came from."""
    family = "ip6" if ":" in observed_ip else "ip4"
    out: list[str] = []
    for addr in claimed:
        parts = addr.split("/")
        if "tcp" not in parts or "p2p-circuit" in parts:
            continue
        port = parts[parts.index("tcp") + 1]
        candidate = f"/{family}/{observed_ip}/tcp/{port}/p2p/{peer_id}"
        if port.isdigit() and candidate not in out:
            out.append(candidate)
    return out[:MAX_PROBES]


RunDelay = Callable[[], float]
"""A reader of the run delay of the thread running trio, in seconds (`node.p2p.looktime`)."""


def reach_handler(probe: Host, run_delay: Callable[[], RunDelay] = machine_run_delay) -> Handler:
    """The handler for `/sark/reach/1.0.0`, dialling back with `probe` (a second, throwaway host).

    `run_delay()` gives the reader each request's dial-backs count their own seconds by (a test's
    starved machine; by default the kernel's count for the trio thread)."""

    async def handle(channel: Channel) -> None:
        request = await channel.receive()
        if not isinstance(request, ReachGet) or channel.remote_ip is None:
            await channel.reset()
            return
        reply = await _probe(probe, channel.peer_id, channel.remote_ip, request.addrs, run_delay())
        await channel.send(reply)
        await channel.close()

    return handle


def throwaway_reach_handler(on_asked: Callable[[str], None]) -> Handler:
    """`/sark/reach/1.0.0` for a worker: each dial-back from a host built for it and closed after.

    `on_asked(peer_id)` names every caller: a sark peer that can in turn dial us back.
    """
    slots = trio.CapacityLimiter(THROWAWAY_PROBES)

    async def handle(channel: Channel) -> None:
        on_asked(channel.peer_id)
        async with slots, open_host(HostConfig(key_file=None)) as probe:
            await reach_handler(probe)(channel)

    return handle


async def _probe(
    probe: Host, peer_id: str, ip: str, claimed: tuple[str, ...], waited: RunDelay
) -> ReachReply:
    """Dial `peer_id` back at each claimed port on `ip`, each dial given `PROBE_TIMEOUT_S` of our own."""
    failures: list[str] = []
    for addr in dial_back_addrs(ip, peer_id, claimed):
        dial = partial(probe.connect, addr, timeout=PROBE_TIMEOUT_S * STRETCH_MAX)
        try:
            reached = await within(PROBE_TIMEOUT_S, waited, dial)
        except NodeError as exc:
            failures.append(f"{addr}: {exc.detail}"[:300])
            continue
        if reached is None:
            failures.append(f"{addr}: no connection within {PROBE_TIMEOUT_S:g} s")
            continue
        await probe.disconnect(peer_id)
        return ReachReply(reachable=True, addr=addr)
    return ReachReply(reachable=False, detail="; ".join(failures)[:1900] or "no tcp address to dial back")


@dataclass(frozen=True)
class ReachVerdict:
    """What the dial-backs said.

    Attributes:
        reachability: direct (a dial-back reached us), relayed (all tried failed) or unknown.
        detail: who reached us at which address, or why not, for people.
        addr: the address one of our gates reached us at ("" otherwise: a helper peer's word is
            enough for a verdict, not for an address we then advertise).
    """

    reachability: Reachability
    detail: str
    addr: str = ""


async def ask_reach(
    host: Host,
    peer_id: str,
    addrs: Sequence[str],
    seconds: float = ASK_TIMEOUT_S,
    waited: RunDelay | None = None,
) -> ReachReply:
    """Ask one peer to dial us back at our listen addresses, waiting `seconds` of our own (`waited`: the
    run delay they leave out; by default the kernel's count for the trio thread).

    Raises:
        NodeError: the peer cannot be reached, serves no `/sark/reach` or did not answer in time.
        ProtocolError: it answered something unreadable.
    """

    async def ask() -> ReachReply:
        real = seconds * STRETCH_MAX
        channel = await host.open_channel(peer_id, REACH, addrs=addrs, timeout=real, read_timeout=real)
        async with channel:
            await channel.send(ReachGet(addrs=tuple(host.addrs()[:16])))
            reply = await channel.receive()
        if not isinstance(reply, ReachReply):
            raise PeerUnreachable(peer_id, f"answered {reply.kind} to reach_get")
        return reply

    reply = await within(seconds, waited or machine_run_delay(), ask)
    if reply is None:
        raise PeerTimeout(peer_id, f"no answer to reach_get within {seconds:g} s")
    return reply


async def dial_back_verdict(
    host: Host, gates: Sequence[str], helpers: Callable[[], Awaitable[list[tuple[str, tuple[str, ...]]]]]
) -> ReachVerdict:
    """Dial-backs by the gates; when none serves `/sark/reach`, by up to `MAX_HELPERS` sark peers.

    `helpers()` gives sark peers that may serve `/sark/reach`, each with its addresses (only called
    when no gate does).
    """
    tried, failures = await _ask_all(host, [(peer_of(g), (g,)) for g in gates])
    by_gate = tried.reachable is not None
    if tried.reachable is None:
        skip = {host.peer_id, *(peer_of(g) for g in gates)}
        others = [(p, addrs) for p, addrs in await helpers() if p not in skip]
        tried, more = await _ask_all(host, others[:MAX_HELPERS])
        failures += more
    if tried.reachable:
        addr = tried.addr if by_gate and _is_ours(tried.addr, host.peer_id) else ""
        return ReachVerdict(Reachability.DIRECT, f"{tried.by} dialled us back at {tried.addr}", addr)
    if tried.reachable is False:
        return ReachVerdict(Reachability.RELAYED, "; ".join(failures))
    return ReachVerdict(Reachability.UNKNOWN, "; ".join(failures) or "no peer to dial us back")


def _is_ours(addr: str, peer_id: str) -> bool:
    """Is `addr` a multiaddr of ours: it parses and ends in our peer id."""
    try:
        parse_multiaddr(addr)
        return peer_of(addr) == peer_id
    except ConfigError:
        return False


@dataclass
class _Tried:
    reachable: bool | None = None
    by: str = ""
    addr: str = ""


async def _ask_all(host: Host, targets: list[tuple[str, tuple[str, ...]]]) -> tuple[_Tried, list[str]]:
    """Ask each target in turn until one reaches us; `reachable` stays None while none could try."""
    tried, failures = _Tried(), []
    for peer_id, addrs in targets:
        try:
            reply = await ask_reach(host, peer_id, addrs)
        except (NodeError, ProtocolError) as exc:
            failures.append(f"{peer_id}: {exc}")
            continue
        if reply.reachable:
            return _Tried(True, peer_id, reply.addr or ""), failures
        tried.reachable = False
        failures.append(f"{peer_id}: {reply.detail}")
    return tried, failures


__all__ = [
    "ReachVerdict",
    "ask_reach",
    "dial_back_addrs",
    "dial_back_verdict",
    "reach_handler",
    "throwaway_reach_handler",
]
