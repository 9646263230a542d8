"""A look's seconds are its own (`node.p2p.looktime`): the seconds the machine kept the submitter
waiting for a CPU are given back, up to `STRETCH_MAX` times the look in all.

A node written here stands in for the DHT and the probes, on trio's virtual clock: each level of the tree
lists 4 stalling Sybils, and the two honest workers are at level `HONEST_LEVEL`. Each lookup is work
of `LOOKUP_S` seconds, of which the machine takes `STARVED` (a count the test keeps, as the kernel's
run delay counts it): the process waits, runnable, for a core. On the real clock the 5 s look runs out
before the walks reach the honest level; on its own seconds it finds both. A process the machine
starves wholly still ends its look, at `STRETCH_MAX` times its seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.testing
from kit.providers import advertised, at, shallowest

from node.p2p.looktime import STRETCH_MAX, LookTime, machine_run_delay, no_delay, run_delay_reader
from node.p2p.node import Node
from node.submitter.discovery import LOOKUP_SLACK, Discovery, DiscoveryConfig
from protocol import AdvertBody, Load

HONEST = ("h0", "h1")
HONEST_LEVEL = 6
LOOKUP_S = 0.5
STARVED = 0.9
"""The share of each lookup's seconds the machine keeps the process waiting for a core."""
LOOK_S = 5.0


class _StarvedTree:
    """Level l lists Sybils s{4l}..s{4l+3} (level `HONEST_LEVEL` also the honest workers); a look returns
    the shallowest level with a provider not skipped nor known, after `LOOKUP_S` of work of which the
    machine took `starved` (added to `waited`, the run delay)."""

    def __init__(self, starved: float) -> None:
        self.levels = [[f"s{4 * level + i}" for i in range(4)] for level in range(40)]
        self.levels[HONEST_LEVEL] += HONEST
        self.starved = starved
        self.waited = 0.0
        self.looks = 0

    def run_delay(self) -> float:
        return self.waited

    async def find_providers(
        self, *, skip: frozenset[str], known: frozenset[str] = frozenset(), **_: Any
    ) -> dict[str, tuple[str, ...]]:
        self.looks += 1
        await trio.sleep(LOOKUP_S)
        self.waited += self.starved * LOOKUP_S
        return shallowest(self.levels, skip, known)

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        if peer_id not in HONEST:
            await trio.sleep_forever()  # a stalling Sybil: the probe's deadline ends it
        await trio.sleep(0.01)
        return advertised(peer_id).advert, Load(), "127.0.0.1"


def _discovery(tree: _StarvedTree, *, counted: bool) -> Discovery:
    config = DiscoveryConfig(want=len(HONEST), count=len(HONEST) * LOOKUP_SLACK, timeout_s=LOOK_S)
    waited = tree.run_delay if counted else no_delay
    return Discovery(cast(Node, tree), config, waited=waited)


@pytest.mark.parametrize("counted", [True, False], ids=["own-seconds", "real-seconds"])
async def test_a_starved_look_gets_back_the_seconds_the_machine_took(
    mock_clock: trio.testing.MockClock, counted: bool
) -> None:
    mock_clock.autojump_threshold = 0
    tree = _StarvedTree(STARVED)
    found = await _discovery(tree, counted=counted).initial()
    real = trio.current_time()
    if counted:  # the walks reached the honest level: both found, past the look's 5 real seconds
        assert {v.peer_id for v in found} == set(HONEST)
        assert LOOK_S < real < LOOK_S * STRETCH_MAX
    else:  # the machine's seconds counted as the look's: it ran out above the honest level
        assert found == ()
        assert tree.looks <= HONEST_LEVEL


async def test_a_look_the_machine_is_not_starving_spends_real_seconds(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    tree = _StarvedTree(0.0)
    tree.levels[HONEST_LEVEL] = tree.levels[HONEST_LEVEL][:4]  # no honest worker: the look runs out
    found = await _discovery(tree, counted=True).initial()
    assert found == ()
    assert LOOK_S <= trio.current_time() < LOOK_S + 1.5  # its last look and probes end past the 5 s


async def test_a_process_starved_wholly_ends_its_look_at_the_stretch_bound(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    waited = 0.0

    def run_delay() -> float:
        return waited

    look = LookTime(LOOK_S, run_delay)
    while not look.over():
        await trio.sleep(0.25)
        waited += 0.25  # every second of it the machine's
    assert trio.current_time() == pytest.approx(LOOK_S * STRETCH_MAX)


def test_the_kernel_counts_this_threads_run_delay_here() -> None:
    """Linux with schedstats (this machine, CI's): the reader reads; a count that never goes back."""
    if not Path("/proc/self/schedstat").exists():
        pytest.skip("this kernel counts no run delay (no /proc/self/schedstat): a look's seconds are real")
    read = run_delay_reader()
    assert read is not None
    first = read()
    assert 0.0 <= first <= read()


PROBE_REAL_S = 4.0
"""The real seconds an honest worker's probe takes when the machine keeps the submitter waiting for a core
90 % of the time: its dial and handshake are the submitter's work (past the probe's 3 s)."""


class _StarvedProbes:
    """Two honest providers at the root key; each probe answers after `PROBE_REAL_S` of real time; the
    machine takes `STARVED` of every second of the submitter's (its run delay grows so)."""

    async def find_providers(
        self, *, skip: frozenset[str], known: frozenset[str] = frozenset(), **_: Any
    ) -> dict[str, tuple[str, ...]]:
        return {p: at(p) for p in HONEST if p not in skip and p not in known}

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        assert timeout >= PROBE_REAL_S  # the node's own timeout does not cut the probe's own seconds
        await trio.sleep(PROBE_REAL_S)
        return advertised(peer_id).advert, Load(), "127.0.0.1"


def starved_run_delay() -> float:
    return STARVED * trio.current_time()


@pytest.mark.parametrize("counted", [True, False], ids=["own-seconds", "real-seconds"])
async def test_a_starved_submitters_probe_waits_its_own_seconds(
    mock_clock: trio.testing.MockClock, counted: bool
) -> None:
    mock_clock.autojump_threshold = 0
    config = DiscoveryConfig(want=len(HONEST), timeout_s=LOOK_S, probe_timeout_s=3.0)
    waited = starved_run_delay if counted else no_delay
    found = await Discovery(cast(Node, _StarvedProbes()), config, waited=waited).initial()
    if counted:  # 4 real seconds are 0.4 of its own: both answered within the probe's 3
        assert {v.peer_id for v in found} == set(HONEST)
        assert PROBE_REAL_S <= trio.current_time() < PROBE_REAL_S + 1.0  # `initial` reads in 0.2 s steps
    else:  # the machine's seconds ran the probes out: both silenced, none found in the look
        assert found == ()


async def test_a_virtual_clock_reads_no_run_delay(mock_clock: trio.testing.MockClock) -> None:
    """A test's virtual seconds are not the machine's: a discovery on one reads no run delay (it did, and
    the unit tests of discovery beside the labs at load read their virtual looks cut short)."""
    assert machine_run_delay() is no_delay


def test_the_machines_clock_reads_the_kernels_run_delay() -> None:
    if not Path("/proc/self/schedstat").exists():
        pytest.skip("this kernel counts no run delay (no /proc/self/schedstat): a look's seconds are real")

    async def reader() -> bool:
        return machine_run_delay() is not no_delay

    assert trio.run(reader)
