"""A campaign fleet in the namespace lab: gates, a model server and a submitter in h1, real workers elsewhere.

```
h1 10.77.0.11  gate(s), model HTTP server, submitter      h2 10.77.0.12  worker
h4 10.77.0.14  worker (the fault lab adds it)             h3 10.77.1.13  worker behind NAT (relayed)
```
Workers are real `sark-node join` processes with short heartbeats (0.5 s, lease 3 s), taking offers
only from the fleet's submitter, fetching the model over http from h1 (allowed network 10.77.0.0/16).
`run_fault` is one fault scenario end to end; the tests in tests/faults and benchmarks/chaos.py share it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.faults import Faults
from kit.netns import H1, NetLab
from kit.procs import SARK, Lab, Proc
from kit.sizing import timed_job
from node.config import NodeConfig
from node.p2p.identity import identity_peer_id

H4 = "10.77.0.14"
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"


def long_job(seconds: float = 4.0, at_least: int = 2000) -> dict[str, int]:
    """A task that is still measuring when a fault strikes half-way: its second half (2 s of runs here,
    2,000 runs at least, progress every 200) holds many heartbeats, and the zombie finishes it seconds
    before the worker that took over finishes all of it (its stale result must come first; at 1,500
    runs that lead was 2 s on a lightly loaded machine, at 3,000 it was 8 s under load). Sized by time
    (`lab.sizing`): longer only costs the lab CPU, every run is repeated."""
    return timed_job(seconds, at_least)


_SERVE = """\
import http.server, json, sys
root, host = sys.argv[1], sys.argv[2]
class Q(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k): super().__init__(*a, directory=root, **k)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer((host, 0), Q)
print(json.dumps({"event": "ready", "port": s.server_address[1]}), flush=True)
s.serve_forever()
"""


class FaultNet(NetLab):
    """The 3-host + NAT lab plus a fourth host `h4` on the bridge."""

    def __init__(self, prefix: str | None = None) -> None:
        super().__init__(prefix)
        self.h4 = f"{self.prefix}-h4"

    def namespaces(self) -> tuple[str, ...]:
        return (self.h1, self.h2, self.h3, self.h4, self.nat, self.sw)

    def up(self) -> None:
        super().up()  # adds every namespace `namespaces()` lists, h4 included
        self._plug(self.h4, f"{H4}/24", f"{self.prefix}4")


def wait_for(proc: Proc, what: str, timeout: float = 120.0, **match: Any) -> dict[str, Any]:
    """The next event of `kind` whose fields match (other events are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{proc.name}: no {what} event matching {match} within {timeout} s")
        event = proc.wait_event(what, left)
        if all(event.get(k) == v for k, v in match.items()):
            return event


@dataclass
class Fleet:
    """A running fleet: the labs, gate addresses, workers by host, the submitter identity."""

    net: FaultNet
    lab: Lab
    faults: Faults
    gates: list[str] = field(default_factory=list)
    workers: dict[str, Proc] = field(default_factory=dict)
    ips: dict[str, str] = field(default_factory=dict)
    submitter_dir: Path = Path()
    submitter_id: str = ""
    model_url: str = ""

    @classmethod
    def start(cls, net: FaultNet, lab: Lab, faults: Faults, gates: int = 1) -> Fleet:
        """A gate (or two) in h1, the model server, and the submitter's identity."""
        fleet = cls(net, lab, faults)
        fleet.submitter_dir = lab.root / "submitter"
        fleet.submitter_id = identity_peer_id(NodeConfig(data_dir=fleet.submitter_dir).key_file())
        for i in range(gates):
            fleet.start_gate(f"gate{i}")
        www = lab.root / "www"
        www.mkdir(exist_ok=True)
        (www / MODEL.name).write_bytes(MODEL.read_bytes())
        server = lab.start("www", [sys.executable, "-c", _SERVE, str(www), H1], ns=net.h1)
        port = server.wait_event("ready", 30)["port"]
        fleet.model_url = f"http://{H1}:{port}/{MODEL.name}"
        return fleet

    def start_gate(self, name: str, port: int = 0) -> str:
        """Start a gate in h1 (on `port` to restart one where it was); returns its address."""
        proc = self.lab.gate(name, 60, listen=f"/ip4/{H1}/tcp/{port}", ns=self.net.h1)
        addr = str(proc.ready["addrs"][0])
        if addr not in self.gates:
            self.gates.append(addr)
        return addr

    def worker(
        self,
        name: str,
        ns: str,
        ip: str,
        *,
        allow: str | None = None,
        wait: bool = True,
        gates: Sequence[str] | None = None,
    ) -> Proc:
        """A real `join` worker in namespace `ns`, listening on `ip`, listing `gates` (the fleet's)."""
        args = ["join", "--listen", f"/ip4/{ip}/tcp/0", "--data-dir", str(self.lab.root / name)]
        args += ["--allow", allow or self.submitter_id, "--record-ttl", str(self.lab.record_ttl)]
        args += ["--no-calibrate", "--allow-http", "--allow-network", "10.77.0.0/16"]
        args += ["--heartbeat", "0.5", "--lease-ttl", "3", "--events"]
        for gate in self.gates if gates is None else gates:
            args += ["--gate", gate]
        proc = self.lab.start(name, [*SARK, *args], ns=ns)
        if wait:
            self._enlist(proc, ip)
        return proc

    def start_workers(self, *specs: tuple[str, str, str]) -> list[Proc]:
        """Several workers `(name, ns, ip)` started at once, then each waited for: a start-up is
        mostly imports, and the lab need not pay for them one after another."""
        started = [(self.worker(name, ns, ip, wait=False), ip) for name, ns, ip in specs]
        for proc, ip in started:
            self._enlist(proc, ip)
        return [proc for proc, _ in started]

    def _enlist(self, proc: Proc, ip: str) -> None:
        proc.ready = proc.wait_event("ready", 90)
        self.workers[proc.ready["peer_id"]] = proc
        self.ips[proc.ready["peer_id"]] = ip

    def campaign(self, jobs: list[dict[str, Any]], name: str = "c") -> Path:
        """A campaign file whose model is the h1 server's URL, pinned by sha256."""
        sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
        path = self.lab.root / f"{name}.yaml"
        path.write_text(json.dumps({"model": {"url": self.model_url, "sha256": sha}, "jobs": jobs}))
        return path

    def submit(self, *args: str, name: str = "submitter") -> Proc:
        """A submitter process in h1 with event lines."""
        argv = [*SARK, *args, "--events", "--data-dir", str(self.submitter_dir)]
        argv += ["--allow-http", "--allow-network", "10.77.0.0/16", "--out", str(self.lab.root / "out")]
        for gate in self.gates:
            argv += ["--gate", gate]
        return self.lab.start(f"{name}-{len(self.lab.procs)}", argv, ns=self.net.h1)


def collect_until(proc: Proc, kind: str, timeout: float) -> list[dict[str, Any]]:
    """Every event up to and including the next one of `kind`."""
    deadline = time.monotonic() + timeout
    seen: list[dict[str, Any]] = []
    while True:
        left = deadline - time.monotonic()
        try:
            event = proc.events.get(timeout=max(0.0, left))
        except Exception:
            raise AssertionError(
                f"{proc.name}: no {kind} event within {timeout} s; saw {seen[-5:]}"
            ) from None
        seen.append(event)
        if event.get("event") == kind:
            return seen


def _rows(outcome: dict[str, Any]) -> list[dict[str, str]]:
    import csv

    with open(outcome["files"]["csv"], newline="") as f:
        return list(csv.DictReader(f))


def _half_done(submitter: Proc, timeout: float = 120.0) -> dict[str, Any]:
    """The first heartbeat of a measurement at least half done: the zombie's half left ends before the
    new worker's fetch and whole run, so its late result is seen (and rejected as stale). `long_job` is
    long enough that several heartbeats (0.5 s apart) fall in its second half; both halves run on the
    same CPUs, so load stretches them alike."""
    deadline = time.monotonic() + timeout
    while True:
        beat = wait_for(submitter, "heartbeat", deadline - time.monotonic(), phase="measuring")
        if beat.get("total") and beat["done"] * 2 >= beat["total"]:
            return beat


FAULTS = ("kill9", "sigstop", "freeze", "partition")
LEAVES = ("sigterm",)
"""Not faults but a graceful leave: the worker hands its lease back (a `released` event, not a lapse)."""


def run_fault(fleet: Fleet, kind: str) -> dict[str, Any]:
    """One task, two workers; fault the one measuring half-way, undo the fault after the lapse.

    Returns the figures: detection (fault to lapse; for a SIGTERM, to the release), re-dispatch (lapse
    or release to the new commit), tasks completed, results lost, stale results rejected, and the checks
    the tests assert on.
    """
    job = {"compute_unit": "CPU (ONNX)", "devices": 1, **long_job()}
    submitter = fleet.submit(
        "submit", str(fleet.campaign([job], kind)), "--wait-peers", str(len(fleet.workers))
    )
    beat = _half_done(submitter)
    victim = fleet.workers[beat["peer"]]
    inject: Callable[[], float] = {
        "kill9": lambda: fleet.faults.kill9(victim),
        "sigstop": lambda: fleet.faults.stop(victim),
        "freeze": lambda: fleet.faults.freeze(victim),
        "partition": lambda: fleet.faults.partition(fleet.ips[beat["peer"]]),
        "sigterm": lambda: fleet.faults.sigterm(victim),
    }[kind]
    undo: Callable[[], float] = {
        "kill9": lambda: time.time(),
        "sigstop": lambda: fleet.faults.cont(victim),
        "freeze": lambda: fleet.faults.thaw(victim),
        "partition": lambda: fleet.faults.heal(fleet.ips[beat["peer"]]),
        "sigterm": lambda: time.time(),
    }[kind]
    t_fault = inject()
    lapsed = wait_for(submitter, "released" if kind in LEAVES else "lapsed", 60, peer=beat["peer"])
    undo()
    after = collect_until(submitter, "outcome", 180)
    outcome = after[-1]
    committed = next(e for e in after if e["event"] == "committed")
    stale = [e for e in after if e["event"] == "stale"]
    rows = _rows(outcome)
    return {
        "fault": kind,
        "detection_s": round(lapsed["t"] - t_fault, 2),
        "redispatch_s": round(committed["t"] - lapsed["t"], 2),
        "tasks": 1,
        "completed": sum(r["Status"] == "Complete" for r in rows),
        "lost": 1 - len(rows),
        "accepted": outcome["accepted"],
        "stale_rejected": outcome["stale"],
        "stale_seen": len(stale),
        "new_peer": committed["peer"],
        "victim": beat["peer"],
        "winner": rows[0]["WorkerPeerId"] if rows else "",
        "exit": submitter.popen.wait(timeout=60),
    }


SHORT_JOB = {"num_inference_runs": 30, "warmup_runs": 2, "load_runs": 1, "processes": 1}


def run_impaired(fleet: Fleet) -> dict[str, Any]:
    """Four short tasks on the two bridge workers under 10 % loss and a 50 ms delay (NFQUEUE shim) on
    each worker's egress and an 8 Mbit/s tbf cap on h1; returns completion figures."""
    net = fleet.net
    for queue, ns in enumerate((net.h2, net.h4), start=1):
        fleet.faults.loss(ns, 10)
        fleet.faults.delay(ns, 50, queue=queue)
    fleet.faults.tbf(net.h1, "8mbit")
    jobs = [{"compute_unit": "CPU (ONNX)", "devices": "all", **SHORT_JOB} for _ in range(2)]
    start = time.time()
    submitter = fleet.submit("submit", str(fleet.campaign(jobs, "impaired")), "--wait-peers", "2")
    seen = collect_until(submitter, "outcome", 240)
    rows = _rows(seen[-1])
    lapses = [e for e in seen if e["event"] == "lapsed"]
    return {
        "fault": "10% loss + 50 ms delay + 8 Mbit/s tbf",
        "detection_s": None,
        "redispatch_s": None,
        "tasks": 4,
        "completed": sum(r["Status"] == "Complete" for r in rows),
        "lost": 4 - len(rows),
        "accepted": seen[-1]["accepted"],
        "stale_rejected": seen[-1]["stale"],
        "lapses": len(lapses),
        "wall_s": round(seen[-1]["t"] - start, 1),
        "exit": submitter.popen.wait(timeout=60),
    }
