"""Issue 50, scope 8: a gate's connection limit is set on purpose and said, and a device refused by a
full gate is told so in one line and joins through another.

py-libp2p 0.8.1's resource manager bound a host at 256 inbound connections whatever `max_connections`
said, and past the handshake: a dialler was "connected", then closed; a real `join` past the cap
printed `ready` with no connection and blamed the gate for its provider records (P33). Now the cap
binds before the handshake and the dialler names it (`node.errors.ClosedAtHandshake`).

In-process hosts for the rule (exactly the cap held, every other dial refused with the cause), real
processes for the user's view: a gate run with `--max-connections 3` says its cap in its ready line;
five `join` workers given it and a second gate all come up, the three first on both, the two last on
the second alone, each of those with one line naming the full gate; `peers` through the second gate
finds all five; a worker given only the full gate says why in its retry line and is never `ready`.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path

import trio
from kit import owntime
from kit.fixtures import LOOPBACK
from kit.procs import LOOPBACK as LISTEN
from kit.procs import SARK, Lab

from node.errors import ClosedAtHandshake, NodeError, error_chain
from node.p2p.gates import cause
from node.p2p.host import NODE_CONNECTIONS, Host, HostConfig, open_host

CAP = 3
FULL = "closed it before the handshake (a libp2p host at its connection limit does so: a full gate"


async def dial_from_new_hosts(
    stack: AsyncExitStack, addr: str, count: int
) -> tuple[list[Host], list[NodeError]]:
    """`count` fresh hosts, each dialling `addr` in turn and keeping its connection; the refusals."""
    hosts: list[Host] = []
    refused: list[NodeError] = []
    for _ in range(count):  # one dial at a time: each keeps its host, and its connection
        host = await stack.enter_async_context(open_host(HostConfig(key_file=None, listen=LOOPBACK)))
        hosts.append(host)
        try:
            await host.connect(addr, timeout=10.0)
        except NodeError as exc:
            refused.append(exc)
    return hosts, refused


async def test_a_host_holds_exactly_its_cap_and_refuses_the_rest_before_the_handshake() -> None:
    async with (
        open_host(HostConfig(key_file=None, listen=LOOPBACK, max_connections=CAP, prune_idle=False)) as gate,
        AsyncExitStack() as stack,
    ):
        addr = gate.addrs()[0]
        peer = addr.rsplit("/p2p/", 1)[-1]
        hosts, refused = await dial_from_new_hosts(stack, addr, CAP + 2)
        assert [h.is_connected(peer) for h in hosts] == [True] * CAP + [False] * 2
        assert len(refused) == 2
        for exc in refused:
            assert any(isinstance(c, ClosedAtHandshake) for c in error_chain(exc))
            assert FULL in cause(exc)


async def test_one_address_holds_at_most_its_share_and_a_closed_connection_frees_its_place() -> None:
    """Every dial here comes from 127.0.0.1: past `max_per_address` the host refuses the next before its
    handshake, as at a full host, though far under its cap; the host's own dials are not counted."""
    share = 2
    config = HostConfig(
        key_file=None, listen=LOOPBACK, max_connections=64, max_per_address=share, prune_idle=False
    )
    async with open_host(config) as gate, AsyncExitStack() as stack:
        addr = gate.addrs()[0]
        peer = addr.rsplit("/p2p/", 1)[-1]
        manager = gate.raw.get_network()._resource_manager
        hosts, refused = await dial_from_new_hosts(stack, addr, share + 1)
        assert [h.is_connected(peer) for h in hosts] == [True] * share + [False]
        assert [FULL in cause(exc) for exc in refused] == [True]
        assert manager.held("127.0.0.1") == share
        assert manager.refused >= 1, manager.refused
        await gate.connect(hosts[-1].addrs()[0], timeout=10.0)  # outbound: not the address's share
        assert gate.is_connected(hosts[-1].peer_id)
        assert manager.held("127.0.0.1") == share
        await hosts[0].disconnect(peer)
        with owntime.fail_after(10):
            while manager.held("127.0.0.1") == share:  # noqa: ASYNC110 (the swarm's close has no event)
                await trio.sleep(0.05)
        late = await stack.enter_async_context(open_host(HostConfig(key_file=None, listen=LOOPBACK)))
        await late.connect(addr, timeout=10.0)
        assert late.is_connected(peer)


def _log(proc: object) -> str:
    path: Path | None = getattr(proc, "log", None)
    return path.read_text() if path is not None and path.exists() else ""


def test_a_full_gate_says_its_cap_and_its_refused_workers_join_through_another(
    tmp_path: Path, profile_file: Path
) -> None:
    lab = Lab(tmp_path)
    try:
        argv = [*SARK, "gate", "--listen", LISTEN, "--data-dir", str(tmp_path / "full"), "--events"]
        full = lab.start("full", [*argv, "--record-ttl", "300", "--max-connections", str(CAP)])
        full.ready = full.wait_event("ready", 30)
        assert full.ready["max_connections"] == CAP
        other = lab.gate("other")
        assert other.ready["max_connections"] == 2048  # the default, said
        a, b = full.ready["addrs"][0], other.ready["addrs"][0]
        workers = [lab.worker(f"w{i}", [a, b], profile_file, timeout=120) for i in range(CAP + 2)]
        assert {w.ready["max_connections"] for w in workers} == {NODE_CONNECTIONS}  # a worker's cap, said
        told = [w for w in workers if "not joined" in _log(w)]
        assert [w.name for w in told] == ["w3", "w4"], [(w.name, _log(w)[-400:]) for w in workers]
        for w in told:
            lines = [line for line in _log(w).splitlines() if "not joined" in line]
            assert len(lines) == 1, lines
            assert f"joined 1 of 2 gates; not joined: {a}: it took the connection and {FULL}" in lines[0]
        found = {p["peer_id"] for p in lab.peers([b])}
        assert {w.ready["peer_id"] for w in workers} <= found

        alone = lab.worker("alone", [a], profile_file, wait=False)
        deadline = time.monotonic() + 120
        while "no gate answered (attempt" not in _log(alone) and time.monotonic() < deadline:
            assert alone.popen.poll() is None, alone.log_excerpt()
            time.sleep(0.2)
        line = next(x for x in _log(alone).splitlines() if "no gate answered (attempt" in x)
        assert f"{a}: it took the connection and {FULL}" in line
        assert alone.events.empty()  # never `ready`: it holds no gate
    finally:
        lab.close()
