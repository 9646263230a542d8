"""`sark-node serve`: the seeds' curl examples, worker endpoints, bind and token rules, path traversal.

`serve` runs as a child process on 127.0.0.1 with its embedded loopback swarm; the model comes from an
HTTP server this test runs on 127.0.0.1. Waits are on the child's event lines, each bounded.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import http.server
import io
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from kit import cpubound, zygote
from kit.procs import SARK

MODEL = Path(__file__).resolve().parents[3] / "examples" / "models" / "tiny-convnet.onnx"
SEED_COLUMNS = [
    "Status",
    "JobId",
    "FileName",
    "FileSize",
    "ComputeUnits",
    "DeviceName",
    "Soc",
    "Ram",
    "DeviceOs",
    "LoadMsMedian",
    "LoadMsAverage",
    "LoadMsStdDev",
    "PeakLoadRamUsage",
    "InferenceMsMedian",
    "InferenceMsAverage",
    "InferenceMsStdDev",
    "PeakInferenceRamUsage",
]


@dataclass
class Served:
    """A running `sark-node serve` child, its event lines and its base URL."""

    popen: subprocess.Popen[str]
    root: Path
    events: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    url: str = ""
    reader: threading.Thread | None = None

    @property
    def api(self) -> str:
        return f"{self.url}/api"

    def wait_event(self, kind: str, timeout: float, **match: Any) -> dict[str, Any]:
        """The next event of `kind` whose fields match, or AssertionError after `timeout` seconds."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"serve: no {kind!r} event within {timeout} s") from None
            if event.get("event") == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    def stop(self) -> None:
        if self.popen.poll() is None:  # a group already gone (its exit not heard yet) is reaped all the same
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        if self.reader is not None:
            self.reader.join(timeout=10)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def _pump(served: Served) -> None:
    assert served.popen.stdout is not None
    for line in served.popen.stdout:
        if line.startswith("{"):
            served.events.put(json.loads(line))


def start_serve(root: Path, *extra: str, timeout: float = 60.0, stderr: IO[str] | None = None) -> Served:
    """Start `serve` on 127.0.0.1:0 with an embedded swarm that may fetch loopback http URLs (its
    stderr into the open file `stderr`, else dropped)."""
    args = [
        "serve",
        "--http",
        "127.0.0.1:0",
        "--events",
        "--data-dir",
        str(root),
        "--allow-http",
        "--allow-network",
        "127.0.0.0/8",
        "--refresh",
        "0.5",
        *extra,
    ]
    popen = zygote.popen(
        [*SARK, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stderr is None else stderr,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    served = Served(popen, root)
    served.reader = threading.Thread(target=_pump, args=(served,), daemon=True)
    served.reader.start()
    try:
        served.url = served.wait_event("http", timeout)["url"]
    except AssertionError:
        served.stop()
        raise
    return served


@dataclass
class ModelServer:
    """A loopback HTTP server for the test model (the campaign's model_url)."""

    server: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @property
    def model_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/{MODEL.name}"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServer]:
    handler = functools.partial(_Quiet, directory=str(MODEL.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ModelServer(server, thread)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = start_serve(tmp_path_factory.mktemp("serve"))
    try:
        s.wait_event("peers", 60, count=1)
        yield s
    finally:
        s.stop()


def seeds_body(model_url: str) -> dict[str, Any]:
    """The seeds' README campaign body, its model on the loopback server."""
    return {
        "model_url": model_url,
        "jobs": [
            {"compute_unit": "CPU (ONNX)", "num_inference_runs": 10},
            {"compute_unit": "GPU (ONNX)", "num_inference_runs": 10},
        ],
    }


def run_campaign(served: Served, body: dict[str, Any]) -> dict[str, Any]:
    """POST the body and wait for the campaign's files; returns the creation answer."""
    r = httpx.post(f"{served.api}/campaigns", json=body, timeout=60)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    served.wait_event("campaign_done", 90, campaign=created["campaign_id"])
    return created


def test_the_embedded_workers_keep_no_challenge_child(served: Served) -> None:
    """`serve`'s embedded workers take offers from its own process alone, which does not challenge
    them: no CPU challenge child waits beside them for the server's life (each one 59 MiB). Its fork
    server (the probe's) has no child between campaigns; before, one spare a worker."""
    forkservers = [
        pid
        for pid in cpubound.children(served.popen.pid)
        if b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert forkservers  # the probe forked from it
    assert [cpubound.children(pid) for pid in forkservers] == [[]]


def test_curl_examples_of_the_seeds(served: Served, model_server: ModelServer) -> None:
    created = run_campaign(served, seeds_body(model_server.model_url))
    cid = created["campaign_id"]
    assert re.fullmatch(r"campaign-\d+", cid)
    assert created["total_jobs"] == 2
    assert created["status"] == "running"
    assert created["jobs"] == [
        {"job_id": f"{cid}-job-0", "compute_unit": "CPU (ONNX)", "status": "pending"},
        {"job_id": f"{cid}-job-1", "compute_unit": "GPU (ONNX)", "status": "pending"},
    ]

    detail = httpx.get(f"{served.api}/campaigns/{cid}").json()
    assert detail["campaign_id"] == cid
    assert detail["model_url"] == model_server.model_url
    assert detail["status"] == "completed"
    assert detail["total_jobs"] == 2
    assert detail["completed_jobs"] == 1
    assert detail["job_breakdown"] == {"pending": 0, "running": 0, "complete": 1, "failed": 1}
    (finished,) = [t for t in detail["tasks"] if t["state"] == "done"]  # its last heartbeat is not its end
    assert finished["done"] == finished["total"] > 0
    assert finished["phase"] is None  # issue 41: its last heartbeat said "measuring"; it is done
    assert finished["median_ms"] > 0

    listing = httpx.get(f"{served.api}/campaigns").json()
    assert listing["count"] >= 1
    assert cid in [c["campaign_id"] for c in listing["campaigns"]]

    r = httpx.get(f"{served.api}/campaigns/{cid}/results")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert list(rows[0])[: len(SEED_COLUMNS)] == SEED_COLUMNS
    assert [row["Status"] for row in rows] == ["Complete", "Unschedulable"]
    assert float(rows[0]["InferenceMsMedian"]) > 0
    assert rows[0]["FileName"] == MODEL.name

    files = httpx.get(f"{served.api}/results/files").json()
    mine = [f for f in files["files"] if f["filename"].startswith(f"{cid}_")]
    assert files["count"] == len(files["files"])
    assert len(mine) == 1
    assert re.fullmatch(rf"{cid}_\d{{8}}_\d{{6}}_results\.csv", mine[0]["filename"])
    assert mine[0]["size_mb"] >= 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", mine[0]["modified"])

    download = httpx.get(f"{served.api}/results/download/{mine[0]['filename']}")
    assert download.status_code == 200
    assert download.text == r.text

    job = httpx.get(f"{served.api}/jobs/{cid}-job-0").json()
    assert job["job"] == {
        "job_id": f"{cid}-job-0",
        "campaign_id": cid,
        "compute_unit": "CPU (ONNX)",
        "status": "complete",
    }
    assert job["result"]["status"] == "Complete"
    assert job["result"]["InferenceMsMedian"] > 0


def test_workers_are_the_swarm_peers(served: Served) -> None:
    served_workers = httpx.get(f"{served.api}/workers").json()
    assert served_workers["count"] == 1
    w = served_workers["workers"][0]
    assert w["worker_id"].startswith("12D3Koo")
    assert "CPU (ONNX)" in w["capabilities"]
    assert w["status"] in ("active", "busy")
    assert w["ip_address"] == "127.0.0.1"
    assert set(w["device_info"]) >= {"Soc", "Ram", "DeviceOs", "UDID"}
    assert 0 < w["load"]["mem_available_mb"] <= int(w["device_info"]["Ram"]) * 1024 * 1.1  # real, not 0
    wid = w["worker_id"]
    assert httpx.get(f"{served.api}/workers/{wid}").json()["worker_id"] == wid

    health = httpx.get(f"{served.api}/workers/{wid}/health").json()
    assert health["is_healthy"] is True
    assert health["seconds_since_heartbeat"] >= 0
    everyone = httpx.get(f"{served.api}/health/workers").json()
    assert (everyone["total"], everyone["healthy"], everyone["unhealthy"]) == (1, 1, 0)

    put = httpx.put(f"{served.api}/workers/{wid}/status", json={"status": "faulty"}).json()
    assert put["worker_id"] == wid
    assert put["applied"] is False
    assert put["status"] in ("active", "busy")
    bad = httpx.put(f"{served.api}/workers/{wid}/status", json={"status": "asleep"})
    assert bad.status_code == 400
    beat = httpx.post(f"{served.api}/workers/{wid}/heartbeat").json()
    assert beat["action"] == "observed"
    assert beat["applied"] is False
    reset = httpx.put(f"{served.api}/workers/{wid}/reset").json()
    assert reset["worker_id"] == wid
    assert reset["applied"] is False

    registered = httpx.post(f"{served.api}/register", json={"device_name": w["device_name"]}).json()
    assert registered == {**registered, "worker_id": wid, "status": "registered", "action": "found"}
    unknown = httpx.post(f"{served.api}/register", json={"device_name": "no-such-device"}).json()
    assert unknown["worker_id"] is None
    assert unknown["status"] == "not_registered"

    for path in ("/workers/nobody", "/workers/nobody/health", "/jobs/campaign-1-job-0", "/campaigns/x"):
        assert httpx.get(f"{served.api}{path}").status_code == 404, path
    for path in ("/health", "/queue/status", "/monitoring/stats"):
        assert httpx.get(f"{served.api}{path}").status_code == 200, path
    assert httpx.get(f"{served.api}/health").json()["status"] == "healthy"


def test_bad_campaigns_are_refused_with_their_problems(served: Served, model_server: ModelServer) -> None:
    r = httpx.post(
        f"{served.api}/campaigns", json={"model_url": model_server.model_url, "jobs": []}, timeout=60
    )
    assert r.status_code == 400
    assert [(p["path"], p["rule"]) for p in r.json()["problems"]] == [("jobs", "invalid")]
    r = httpx.post(
        f"{served.api}/campaigns",
        json={"model": {"path": "/etc/passwd"}, "jobs": [{"compute_unit": "CPU (ONNX)"}]},
        timeout=60,
    )
    assert r.status_code == 400
    [problem] = r.json()["problems"]
    assert (problem["path"], problem["rule"]) == ("model.path", "local_path")
    assert "URL" in problem["message"]
    endpoint = {"url": "https://api.example.com/v1", "model": "m", "api_key_env": "SARK_UNSET_HTTP_KEY"}
    black = {"jobs": [{"endpoint": endpoint, "generate": {"prompts": "builtin:summaries"}}]}
    r = httpx.post(f"{served.api}/campaigns", json=black, timeout=60)
    assert r.status_code == 400
    [problem] = r.json()["problems"]
    assert problem["path"] == "jobs[0].endpoint.api_key_env"
    r = httpx.post(
        f"{served.api}/campaigns", content=b"\xff\xfe", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["problems"][0]["rule"] == "not_utf8"


@pytest.mark.parametrize(
    "name",
    ["../campaigns.sqlite", "..%2Fcampaigns.sqlite", "%2e%2e%2fcampaigns.sqlite", "..", "identity.key"],
)
def test_download_never_leaves_the_results_folder(served: Served, name: str) -> None:
    assert (served.root / "campaigns.sqlite").is_file()
    r = httpx.get(f"{served.api}/results/download/{name}")
    assert r.status_code in (400, 404)
    assert b"SQLite" not in r.content


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path) -> None:
    out = zygote.run(
        [*SARK, "serve", "--http", "0.0.0.0:0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "SARK_HTTP_TOKEN"},
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "token" in lines[0]


def test_with_a_token_every_request_needs_it(tmp_path: Path) -> None:
    s = start_serve(tmp_path, "--token", "s3cret")
    try:
        for path in ("/", "/api/health", "/api/workers", "/api/openapi.json", "/api/results/files"):
            assert httpx.get(f"{s.url}{path}").status_code == 401, path
            bad = httpx.get(f"{s.url}{path}", headers={"Authorization": "Bearer wrong"})
            assert bad.status_code == 401, path
            good = httpx.get(f"{s.url}{path}", headers={"Authorization": "Bearer s3cret"})
            assert good.status_code == 200, path
        assert httpx.post(f"{s.url}/api/reset").status_code == 401
    finally:
        s.stop()


def test_completed_means_the_files_are_listed(served: Served, model_server: ModelServer) -> None:
    """The seeds' workflow: POST, poll GET /campaigns/{id} until it is no longer running, then list the
    result files and download the CSV at once. "completed" is said only once the files are there."""
    r = httpx.post(f"{served.api}/campaigns", json=seeds_body(model_server.model_url), timeout=60)
    assert r.status_code == 201, r.text
    cid = r.json()["campaign_id"]
    deadline = time.monotonic() + 120
    status = "running"
    while status == "running":  # the client's own polling is the workflow under test
        assert time.monotonic() < deadline, f"{cid} still running after 120 s"
        status = httpx.get(f"{served.api}/campaigns/{cid}", timeout=30).json()["status"]
        time.sleep(0.02)  # a client's poll interval; the assertion below does not depend on it
    assert status == "completed"
    files = httpx.get(f"{served.api}/results/files", timeout=30).json()["files"]
    mine = [f["filename"] for f in files if f["filename"].startswith(f"{cid}_")]
    assert len(mine) == 1, files
    download = httpx.get(f"{served.api}/results/download/{mine[0]}", timeout=30)
    assert download.status_code == 200
    rows = list(csv.DictReader(io.StringIO(download.text)))
    assert [row["Status"] for row in rows] == ["Complete", "Unschedulable"]
