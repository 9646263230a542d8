"""The campaign lab: a gate and real `sark-node join` workers as processes, a submitter identity.

Workers detect this machine for real (no calibration, to save time), take offers only from the
lab's submitter, may fetch models over plain http from loopback, and use short heartbeats.
"""

from __future__ import annotations

import contextlib
import csv
import http.server
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit import zygote
from kit.procs import LOOPBACK, SARK, Lab, Proc
from node.config import NodeConfig
from node.p2p.identity import identity_peer_id

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"
LIAR = ROOT / "tests" / "kit" / "replicaliar.py"


PACING = Path(__file__).resolve().parent / "pacing"
PACE_MS = 10.0
"""The pace of the labs that compare replicas' timings: every honest inference is timed at it, within
the pacer's jitter, whatever the load (tests/kit/pacing/sitecustomize.py)."""


def paced_env(pace_ms: float, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`env` (this process's) for a worker whose every ONNX inference takes `pace_ms`."""
    path = os.pathsep.join(p for p in (str(PACING), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "SARK_LAB_PACE_MS": str(pace_ms)}


class CampaignLab(Lab):
    """The process lab plus workers that run benchmarks for one submitter.

    With `pace_ms`, every worker's ONNX inference takes that long (tests/kit/pacing/sitecustomize.py:
    the real run, then a sleep to the pace, timed at the pace by the measuring child's clock): a lab
    comparing replicas' timings runs on a paced workload, so that the timings compare on a loaded
    machine as on an idle one.
    """

    def __init__(self, root: Path, *, record_ttl: float = 300.0, pace_ms: float | None = None) -> None:
        super().__init__(root, record_ttl=record_ttl)
        self.pace_ms = pace_ms

    def real_worker(
        self,
        name: str,
        gates: list[str],
        allow: str,
        timeout: float = 60.0,
        *,
        wait: bool = True,
        extra: list[str] | None = None,
        program: list[str] | None = None,
    ) -> Proc:
        """A `join` worker for the lab's submitter; `program` runs instead of `sark-node` (a hostile
        worker script from tests/lab that takes the same arguments)."""
        args = [
            "join",
            "--listen",
            LOOPBACK,
            "--data-dir",
            str(self.root / name),
            "--allow",
            allow,
            "--record-ttl",
            str(self.record_ttl),
            "--no-calibrate",
            "--allow-http",
            "--allow-network",
            "127.0.0.0/8",
            "--heartbeat",
            "0.5",
            "--lease-ttl",
            "3",
            "--events",
        ]
        for gate in gates:
            args += ["--gate", gate]
        proc = self.start(name, [*(program or SARK), *args, *(extra or [])], env=self.paced_env())
        if wait:
            proc.ready = proc.wait_event("ready", timeout)
        return proc

    def paced_env(self) -> dict[str, str] | None:
        """A worker's environment: this process's, paced when the lab is (None: this process's)."""
        return None if self.pace_ms is None else paced_env(self.pace_ms)

    def submitter(self, args: list[str]) -> Proc:
        """A submitter process printing event lines (the caller passes --events)."""
        return self._start(f"submitter-{len(self.procs)}", args)


@dataclass
class Swarm:
    """A running lab: its gate address, workers by peer id, and the submitter's data directory."""

    lab: CampaignLab
    gate: str
    workers: dict[str, Proc]
    submitter_dir: Path
    root: Path
    names: dict[str, str] = field(default_factory=dict)

    def submit_args(self, *args: str) -> list[str]:
        return [*SARK, *args, "--gate", self.gate, "--data-dir", str(self.submitter_dir)]

    def start_submit(self, *args: str) -> Proc:
        """A submitter as a background process with event lines."""
        return self.lab.submitter(
            [*args, "--events", "--gate", self.gate, "--data-dir", str(self.submitter_dir)]
        )

    def run(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        """Run a submitter command to its end, in the lab's root (a `submit` without `--out` writes
        there); past `timeout`, AssertionError with what it and the workers printed (a stuck campaign
        is told by both sides)."""
        try:
            return zygote.run(
                self.submit_args(*args), capture_output=True, text=True, timeout=timeout, cwd=self.root
            )
        except subprocess.TimeoutExpired as exc:
            said = "\n".join(proc.last_said() for proc in self.workers.values())
            printed = [*(exc.stdout or "").splitlines()[-10:], *(exc.stderr or "").splitlines()[-40:]]
            tail = "\n".join(printed)  # its last output (a stuck exit shows it after its answer)
            raise AssertionError(f"{' '.join(args)}: not done within {timeout} s\n{tail}\n{said}") from None

    def drain(self) -> dict[str, list[dict[str, Any]]]:
        """Every event each worker printed since the last drain."""
        out: dict[str, list[dict[str, Any]]] = {}
        for peer, proc in self.workers.items():
            events = []
            while not proc.events.empty():
                events.append(proc.events.get_nowait())
            out[peer] = events
        return out


def submitter_id(data_dir: Path) -> str:
    """The peer id of the identity in `data_dir` (created if missing), as `sark-node id` prints it."""
    return identity_peer_id(NodeConfig(data_dir=data_dir).key_file())


def liar(mode: str) -> list[str]:
    """A replica liar's program (tests/kit/replicaliar.py in `mode`), as `real_worker`'s `program`."""
    return [sys.executable, str(LIAR), mode]


def _start(
    lab: CampaignLab, programs: Mapping[str, list[str] | None], timeout: float
) -> tuple[Swarm, dict[str, str]]:
    """The lab's gate and a `join` worker for each name of `programs` (its program instead of
    `sark-node` where one is given: a hostile worker), started at once and ready; each name's peer id."""
    submitter_dir = lab.root / "submitter"
    me = submitter_id(submitter_dir)
    gate = lab.gate().ready["addrs"][0]
    started = {n: lab.real_worker(n, [gate], me, wait=False, program=p) for n, p in programs.items()}
    ids: dict[str, str] = {}
    for name, proc in started.items():  # started at once: a start-up is mostly imports
        proc.ready = proc.wait_event("ready", timeout)
        ids[name] = proc.ready["peer_id"]
    return Swarm(lab, gate, {ids[n]: p for n, p in started.items()}, submitter_dir, lab.root, ids), ids


@contextlib.contextmanager
def named_swarm(
    root: Path, programs: Mapping[str, list[str] | None], *, pace_ms: float | None = PACE_MS
) -> Iterator[tuple[Swarm, dict[str, str]]]:
    """`_start`'s swarm on a paced workload, and each name's peer id, for the block (the lab is closed
    at its end)."""
    lab = CampaignLab(root, record_ttl=30.0, pace_ms=pace_ms)
    try:
        yield _start(lab, programs, 120)
    finally:
        lab.close()


def start_swarm(root: Path, workers: int) -> Swarm:
    """A gate and `workers` honest workers (w0, w1, ...); the caller closes its lab."""
    lab = CampaignLab(root, record_ttl=30.0)
    try:
        return _start(lab, dict.fromkeys(f"w{i}" for i in range(workers)), 60)[0]
    except BaseException:
        lab.close()
        raise


@pytest.fixture(scope="module")
def swarm3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    """A gate and three workers shared by a module's tests (nothing in them kills a process)."""
    swarm = start_swarm(tmp_path_factory.mktemp("swarm3"), 3)
    try:
        yield swarm
    finally:
        swarm.lab.close()


@pytest.fixture
def swarm2(tmp_path: Path) -> Iterator[Swarm]:
    """A gate and two workers of the test's own, for tests that kill processes."""
    swarm = start_swarm(tmp_path, 2)
    try:
        yield swarm
    finally:
        swarm.lab.close()


def write_campaign(path: Path, body: dict[str, Any]) -> Path:
    """A campaign file (JSON is YAML) beside a copy of the example model."""
    shutil.copy(MODEL, path.parent / MODEL.name)
    path.write_text(json.dumps(body))
    return path


@dataclass(frozen=True)
class Submitted:
    """What a discovery lab reads of one `submit` (`submit_devices`)."""

    code: int
    seconds: float
    """To discovery: its `discovered` event."""
    ran: set[str]
    """The peers its rows completed on."""
    stderr: str


def submit_devices(root: Path, name: str, gate: str, *, netns: str | None = None) -> Submitted:
    """`submit --events` of a `devices: 2` campaign of the example model on `gate` (in network namespace
    `netns` if given), as the identity in `root / "submitter"`, its files and stderr in `root / name`."""
    (root / name).mkdir()
    job = {"compute_unit": "CPU (ONNX)", "devices": 2, "num_inference_runs": 3, "warmup_runs": 1,
           "load_runs": 1, "processes": 1, "threads": 1}  # fmt: skip
    body = {"name": name, "model": {"path": MODEL.name}, "jobs": [job]}
    path = write_campaign(root / name / "c.yaml", body)
    args = ["submit", str(path), "--events", "--out", str(root / name / "out"), "--gate", gate]
    args += ["--data-dir", str(root / "submitter")]
    done = zygote.run([*SARK, *args], capture_output=True, text=True, timeout=300, netns=netns)
    (root / name / "stderr.txt").write_text(done.stderr)
    events = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    (found,) = [e for e in events if e.get("event") == "discovered"]
    ran: set[str] = set()
    for csv_path in (root / name / "out").rglob("results.csv"):
        with csv_path.open(newline="") as f:
            ran |= {r["WorkerPeerId"] for r in csv.DictReader(f) if r["Status"] == "Complete"}
    return Submitted(done.returncode, float(found["seconds"]), ran, done.stderr)


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[str]:
    """A loopback HTTP server serving the example model; yields its base URL."""
    root = tmp_path / "www"
    root.mkdir()
    shutil.copy(MODEL, root / MODEL.name)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Health:
    """`/api/health` asked every 0.2 s from a thread until stopped; every answer that was not a 200."""

    def __init__(self, api: str) -> None:
        self.api, self.asked, self.failed = api, 0, list[str]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.wait(0.2):
                try:
                    status = client.get(f"{self.api}/health").status_code
                except httpx.HTTPError as exc:
                    self.failed.append(f"{type(exc).__name__}: {exc}")
                    continue
                self.asked += 1
                if status != 200:
                    self.failed.append(str(status))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def campaign_end(served: Proc, campaign_id: str, timeout: float) -> dict[str, Any]:
    """The event that ends the campaign: its files written ("campaign_done") or why not; an
    AssertionError at once if serve exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = served.events.get(timeout=1.0)
        except queue.Empty:
            assert served.popen.poll() is None, f"serve exited {served.popen.poll()}\n{served.log_excerpt()}"
            continue
        ends = event.get("event") in ("campaign_done", "campaign_failed")
        if ends and event.get("campaign") == campaign_id:
            return event
    raise AssertionError(f"campaign {campaign_id} did not end\n{served.log_excerpt()}")
