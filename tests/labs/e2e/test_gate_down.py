"""Issue 30: a worker whose gates are down keeps trying, with backoff, and joins when one comes up.

`join` as README writes it (`--gate ADDR --allow PEER`, default listen address, no event lines),
started with a gate address where nothing listens: it stays up and prints one line per attempt (it
used to exit 1 after about 10 s, and under systemd's restart limit a fleet's workers stopped for good
after a gate outage of 2.5 minutes). Then a real gate comes up on that address: the worker joins, and
`peers` lists it; Ctrl-C then is its graceful leave (exit 0).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from kit.campaignlab import submitter_id
from kit.procs import SARK, Lab

from node.p2p.gates import backoff
from node.worker.leave import LEAVE_S

WATCH_S = 8.0
"""How long the worker is watched with its gate down: rounds at 0, 1, 3 and 7 s."""


def _attempts(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "no gate answered (attempt" in line]


def test_a_worker_outlives_its_gate_being_down_and_joins_when_it_comes_up(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on, for the gate to come up on later
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gate_id = submitter_id(tmp_path / "gate")  # the gate's identity, made before the gate runs
    gate = f"/ip4/127.0.0.1/tcp/{port}/p2p/{gate_id}"
    lab = Lab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "me")
        worker = lab.start(
            "worker",
            [
                *SARK,
                "join",
                "--gate",
                gate,
                "--allow",
                me,
                "--data-dir",
                str(tmp_path / "w"),
                "--no-calibrate",
            ],
        )
        assert worker.log is not None
        deadline = time.monotonic() + 60
        while not _attempts(worker.log) and time.monotonic() < deadline:  # after the device probe
            assert worker.popen.poll() is None, worker.log_excerpt()
            time.sleep(0.2)
        time.sleep(WATCH_S)
        assert worker.popen.poll() is None, worker.log_excerpt()  # still running, still trying
        attempts = _attempts(worker.log)
        assert len(attempts) >= 3, worker.log_excerpt()
        for n, line in enumerate(attempts, 1):  # one line each: the gate, the cause, the next try
            assert f"(attempt {n}): {gate}: connection refused; trying again in {backoff(n):g} s" in line
        assert len(worker.log.read_text().splitlines()) == len(attempts)  # and nothing else

        gate_proc = lab.start(
            "gate",
            [*SARK, "gate", "--listen", f"/ip4/127.0.0.1/tcp/{port}", "--data-dir", str(tmp_path / "gate"),
             "--record-ttl", "30", "--events"],
        )  # fmt: skip
        gate_proc.ready = gate_proc.wait_event("ready", 60)
        assert gate_proc.ready["peer_id"] == gate_id
        joined = worker.wait_line("joined as ", timeout=60)  # the next round finds it
        peer_id = joined.split()[2]
        deadline = time.monotonic() + 60
        while peer_id not in [p["peer_id"] for p in lab.peers([gate])]:
            assert time.monotonic() < deadline, worker.log_excerpt()
            time.sleep(1)
        print(f"\n{len(attempts)} attempts in {WATCH_S:g} s with the gate down; joined as {peer_id}")
        os.killpg(worker.popen.pid, signal.SIGINT)  # Ctrl-C in its terminal: the graceful leave
        assert worker.popen.wait(timeout=LEAVE_S) == 0, worker.log_excerpt()
        worker.wait_line("left the swarm in ", timeout=5)
    finally:
        lab.close()
