"""Issue 7 acceptance with real processes: campaigns on the embedded loopback swarm, report.html in
headless Chromium, `report` re-rendering from the store, `report --diff`, calibration in info and peers.

Each campaign is a real `sark-node submit` (an in-process gate and workers on 127.0.0.1, real
onnxruntime children); the models are examples/make_model.py's network at depth 4 and depth 16.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from kit import zygote
from kit.campaignlab import PACE_MS, paced_env
from kit.chromium import chromium_env
from kit.procs import LOOPBACK, SARK, Lab, Proc
from typer.testing import CliRunner

import scheduler as sch
from drivers.measuring.device import device_name
from node.cli.report import register
from protocol import Stats
from scheduler.results import decimals_for

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path("/usr/bin/chromium")
ENV = {**os.environ, "COLUMNS": "160", "PYTHONUNBUFFERED": "1"}


def _paced(pace_ms: float) -> dict[str, str]:
    """`ENV` for a `submit` whose embedded workers time every ONNX inference at `pace_ms`."""
    return paced_env(pace_ms) | {k: ENV[k] for k in ("COLUMNS", "PYTHONUNBUFFERED")}


def _sark(*args: str | Path, cwd: Path, timeout: float = 240.0, env: dict[str, str] | None = None) -> str:
    done = zygote.run(
        [*SARK, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env or ENV
    )
    assert done.returncode == 0, f"sark-node {args} exited {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


def _report(*args: str | Path) -> str:
    """`sark-node report ARGS` in this process (the command as the CLI registers it); its stdout."""
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    result = CliRunner().invoke(app, ["report", *map(str, args)])
    assert result.exit_code == 0, (
        f"report {args} exited {result.exit_code}: {result.exception!r}\n{result.output[-3000:]}"
    )
    return result.stdout


def _campaign(path: Path, model: str, *, processes: int, runs: int, gpu: bool = False) -> Path:
    job = f"  - compute_unit: CPU (ONNX)\n    num_inference_runs: {runs}\n    warmup_runs: 5\n"
    job += "    load_runs: 1\n    threads: 1\n"
    if gpu:
        job += "  - compute_unit: GPU (ONNX)\n    num_inference_runs: 10\n"
    path.write_text(f"name: {path.stem}\nprocesses: {processes}\nmodel:\n  path: {model}\njobs:\n{job}")
    return path


def _campaign_id(stdout: str) -> str:
    found = re.search(r"campaign (campaign-\d+)", stdout)
    assert found is not None, stdout
    return found.group(1)


@dataclass(frozen=True)
class Run:
    """One finished `submit`: its id, data directory, output folder and what it printed."""

    campaign_id: str
    data_dir: Path
    out_dir: Path
    stdout: str

    def document(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.out_dir / "results.json").read_text())
        return loaded


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    for depth in (4, 16):
        zygote.run(
            [sys.executable, str(ROOT / "examples" / "make_model.py"), "--depth", str(depth), "--out",
             str(root / f"d{depth}.onnx")],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    return root


def _submit(work: Path, campaign: Path, data: str, workers: int, env: dict[str, str] | None = None) -> Run:
    stdout = _sark(
        "submit", campaign, "--workers", str(workers), "--wait-peers", str(workers), "--data-dir", data,
        "--out", "out", cwd=work, env=env,
    )  # fmt: skip
    cid = _campaign_id(stdout)
    return Run(cid, work / data, work / "out" / cid, stdout)


@pytest.fixture(scope="module")
def three_workers(work: Path) -> Run:
    campaign = _campaign(work / "three.yaml", "d4.onnx", processes=2, runs=30, gpu=True)
    return _submit(work, campaign, "data-three", 3)


@pytest.fixture(scope="module")
def pair(work: Path) -> tuple[Run, Run, Run]:
    """Depth 4 twice at the same time (each its own swarm and store), then depth 16 after the first,
    on a paced workload (tests/kit/pacing): each depth-4 inference timed at `PACE_MS`, each depth-16
    one at 4 x `PACE_MS` (four times the work, as the real network is). What is under test is the
    diff's statistics, not onnxruntime's speed: measured for real, the two depths were run minutes
    apart beside another suite, and once (CI-equivalent run at 66d2fcf) the depth-4 run met the
    other worker's load and the depth-16 run a quiet machine, and the 4x regression was not
    significant."""
    same = _campaign(work / "same.yaml", "d4.onnx", processes=5, runs=30)
    deep = _campaign(work / "deep.yaml", "d16.onnx", processes=5, runs=30)
    args = ("submit", same, "--workers", "1", "--wait-peers", "1", "--out", "out")
    procs = [
        zygote.popen(
            [*SARK, *map(str, (*args, "--data-dir", data))],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_paced(PACE_MS),
        )
        for data in ("data-a", "data-b")
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    a, b = (
        Run(_campaign_id(out), work / data, work / "out" / _campaign_id(out), out)
        for (out, _), data in zip(outs, ("data-a", "data-b"), strict=True)
    )
    return a, b, _submit(work, deep, "data-a", 1, env=_paced(4 * PACE_MS))


def test_three_workers_write_a_self_contained_report(three_workers: Run) -> None:
    page = (three_workers.out_dir / "report.html").read_text()
    for part in ("matrix-0", "heatmap-0", "distributions-0", "resources-0", "processes-0", "conditions"):
        assert f'id="{part}"' in page
    telemetry = page.count('class="telemetry"')  # one time plot per measured task (3 workers)
    assert telemetry == 3
    assert page.count("<svg") == 4 + telemetry
    for i in range(3):  # embedded workers: this machine's name and their index, whatever --workers is
        assert f"{html.escape(device_name())}-{i}" in page
    assert "Unschedulable" in page  # the GPU job, with no GPU here
    # Nothing to fetch: no scripts, links or images; every reference is inside the page (an id, inline data).
    assert not re.search(r"<script|<link|<img|@import|url\(\s*['\"]?http", page)
    refs = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert refs
    assert all(ref.startswith(("#", "data:image/png;base64,")) for ref in refs)


def test_submit_prints_the_same_matrix(three_workers: Run) -> None:
    assert "median inference latency" in three_workers.stdout
    for result in three_workers.document()["results"]:
        row = result["row"]
        if row["Status"] == "Complete":
            assert row["DeviceName"] in three_workers.stdout
            stats = Stats.model_validate(result["signed"]["measurement"]["inference_ms"])
            decimals = decimals_for(stats)
            shown = f"{stats.median:.{decimals}f}"  # the CSV's median, rounded to what its spread supports
            assert shown in three_workers.stdout
            assert abs(float(row["InferenceMsMedian"]) - float(shown)) <= 10.0**-decimals
    assert "Unschedulable" in three_workers.stdout


def test_each_result_has_process_medians_spread_and_a_stability_flag(three_workers: Run) -> None:
    results = [r for r in three_workers.document()["results"] if r["row"]["Status"] == "Complete"]
    assert len(results) == 3
    for result in results:
        row, measurement = result["row"], result["signed"]["measurement"]
        assert len(measurement["process_medians_ms"]) == 2
        assert len(row["ProcessMedians"].split(";")) == 2
        assert float(row["ProcessSpreadPct"]) >= 0
        assert row["Unstable"] in ("True", "False")
        assert measurement["unstable"] == (row["Unstable"] == "True")
        assert len(result["samples_ms"]) == 2 * 30


@pytest.mark.chromium
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)")
def test_report_renders_in_headless_chromium_without_network(three_workers: Run, tmp_path: Path) -> None:
    page = three_workers.out_dir / "report.html"
    shot = tmp_path / "report.png"
    base = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    with chromium_env() as env:
        dom = zygote.run(
            [*base, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=env,
        )
    for part in ("matrix-0", "heatmap-0", "distributions-0", "processes-0"):
        assert re.search(rf'<figure id="{part}"[^>]*><svg|<div id="{part}"[^>]*><table', dom.stdout)
    assert f"{html.escape(device_name())}-0" in dom.stdout
    problems = re.findall(r".*(?:net::ERR_|Uncaught|Failed to load resource|CONSOLE\(\d+\)).*", dom.stderr)
    assert problems == []
    with chromium_env() as env:
        zygote.run(
            [*base, "--window-size=1280,2600", f"--screenshot={shot}", page.as_uri()],
            capture_output=True, timeout=120, check=True, env=env,
        )  # fmt: skip
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("SARK_REPORT_SCREENSHOT")  # to look at the page: set it to a file path
    if keep:
        shutil.copy(shot, keep)


def test_report_rerenders_a_stored_campaign_in_every_format(three_workers: Run, tmp_path: Path) -> None:
    run = three_workers
    common = (run.campaign_id, "--data-dir", run.data_dir)
    md = _report(*common, "--format", "md")
    assert "| device | CPU (ONNX) | GPU (ONNX) |" in md
    document = json.loads(_report(*common, "--format", "json"))
    written = run.document()
    assert document["campaign_id"] == run.campaign_id
    done = [r for r in written["results"] if r["row"]["Status"] == "Complete"]
    assert [r for r in document["results"] if r["row"]["Status"] == "Complete"] == done
    csv = _report(*common, "--format", "csv")
    assert csv.splitlines()[0] == ",".join(sch.CSV_COLUMNS)
    assert len(csv.splitlines()) == 1 + len(written["results"])
    out = tmp_path / "again.html"
    assert _report(*common, "--out", out).strip() == str(out)
    assert out.read_text().count("<svg") == 4 + 3  # the four sections and 3 tasks' telemetry


def _diff(*args: str | Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(_report("--diff", *args, "--json"))["rows"]
    return rows


def test_diff_reports_a_4x_deeper_model_as_a_significant_regression(pair: tuple[Run, Run, Run]) -> None:
    shallow, _, deep = pair
    (row,) = _diff(shallow.campaign_id, deep.campaign_id, "--data-dir", shallow.data_dir)
    assert row["significant"], row
    assert row["regression"], row
    assert row["change_pct"] > 20.0
    assert row["p_value"] < 0.05
    assert (row["n_before"], row["n_after"]) == (150, 150)


def test_diff_of_two_runs_of_the_same_model_is_no_significant_change(pair: tuple[Run, Run, Run]) -> None:
    a, b, _ = pair
    (row,) = _diff(a.out_dir, b.out_dir / "results.json")
    assert row["verdict"] == "no significant change", row
    assert not row["significant"]
    assert not row["regression"]


def test_diff_needs_two_known_campaigns(tmp_path: Path) -> None:
    done = zygote.run(
        [*SARK, "report", "--diff", "campaign-1", "campaign-2", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=ENV,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no campaign campaign-1" in done.stderr


def test_a_results_json_that_does_not_fit_is_refused_naming_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    document = json.loads((ROOT / "tests" / "golden" / "tensor" / "results.json").read_text())
    document["results"][0]["samples_ms"] = "many"
    bad.write_text(json.dumps(document))
    done = zygote.run(
        [*SARK, "report", str(bad), "--format", "md", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=ENV,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{bad}: not a results.json" in done.stderr
    assert "results.0.samples_ms" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


def _join(lab: Lab, gates: list[str], data: Path) -> tuple[str, Proc]:
    worker = lab.start(
        "worker",
        [*SARK, "join", "--listen", LOOPBACK, "--data-dir", str(data), "--gate", gates[0], "--events"],
    )
    return worker.wait_event("ready", 60)["peer_id"], worker


def test_info_and_peers_show_the_calibration_and_the_next_join_reuses_it(lab: Lab, tmp_path: Path) -> None:
    gate = lab.gate()
    gates = list(gate.ready["addrs"])
    _, worker = _join(lab, gates, tmp_path / "w")
    (cache,) = (tmp_path / "w" / "profile").glob("calibration-*.json")
    cached, written = json.loads(cache.read_text()), cache.stat().st_mtime_ns
    lab.kill(worker)
    peer_id, _ = _join(lab, gates, tmp_path / "w")  # the next join
    (peer,) = [p for p in lab.peers(gates) if p["peer_id"] == peer_id]
    assert peer["calibration"]["cpu_gflops"] > 0
    assert peer["calibration"]["mem_bandwidth_gbs"] > 0
    if cached["quiet"]:  # a quiet figure is reused (timings never repeat exactly: equal means cached)
        assert peer["calibration"] == cached
        assert cache.stat().st_mtime_ns == written
    else:  # taken under load: kept while the machine stays loaded, taken again once it is quiet
        assert peer["calibration"] == cached or peer["calibration"]["quiet"]
    info = _sark("info", "--data-dir", tmp_path / "w", cwd=tmp_path)
    assert re.search(r"calibration\W+[\d.]+ GFLOPS fp32 matmul, [\d.]+ GB/s copy", info)
