"""Issue 4 acceptance 5 (T7, T8, T9): floods do not stop a worker answering a second peer.

One peer opens 2,000 streams at once, another sends 10,000 malformed frames, a third opens raw TCP
connections that speak garbage, a fourth drips one byte a second; all at the same time, all real
processes on loopback. A second, honest peer does `/sark/profile` round trips throughout; its p99 is
printed (never asserted: only that every round trip was answered within its 5 s deadline).
"""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
from lab.procs import Lab

FLOOD = str(Path(__file__).resolve().parents[1] / "lab" / "flood.py")


def test_floods_do_not_stop_the_node_answering_a_second_peer(lab: Lab, profile_file: Path) -> None:
    gates = lab.gate().ready["addrs"]
    victim = lab.worker("victim", gates, profile_file)
    target = victim.ready["addrs"][0]
    rss_before = psutil.Process(victim.popen.pid).memory_info().rss

    pinger = lab.start("pinger", [sys.executable, FLOOD, "ping", "--target", target], stdin=True)
    pinger.wait_event("ready", 30)
    attacks = {
        "streams": 2000,  # T7
        "junk": 10_000,  # T8
        "tcp-junk": 200,  # T8, below the handshake
        "drip": 20,  # T9: seconds of one byte a second; the node's deadline is 10 s
    }
    procs = {
        mode: lab.start(mode, [sys.executable, FLOOD, mode, "--target", target, "--count", str(n)])
        for mode, n in attacks.items()
    }
    results = {mode: proc.wait_event(mode, 120) for mode, proc in procs.items()}
    assert pinger.popen.stdin is not None
    pinger.popen.stdin.write("stop\n")
    pinger.popen.stdin.flush()
    pings = pinger.wait_event("ping", 30)
    rss_after = psutil.Process(victim.popen.pid).memory_info().rss
    print(f"\nflood: {results}\nhonest peer during the flood: {pings}")
    print(f"victim RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB")

    assert victim.popen.poll() is None, "the victim died"
    assert pings["failed"] == 0, pings["errors"]
    assert pings["count"] >= 10
    streams = results["streams"]
    assert streams["opened"] == attacks["streams"], streams  # none stalled past 30 s (P22)
    assert streams["refused"] >= 0.9 * attacks["streams"], streams  # past the per-peer cap: busy at once
    assert results["junk"]["frames"] == attacks["junk"]
    assert results["junk"]["answered"] == 0
    assert results["tcp-junk"]["closed_by_node"] == attacks["tcp-junk"]
    assert results["drip"]["cut"], results["drip"]
