"""Issue 41: a model server that answers HTTP 500 to every request is the server's failure, in every view.

A black-box open-loop job (`request_rate` for `DURATION_S`) through a real embedded worker against a
loopback server that answers 500 every time (its own count and clock kept). `submit` exits 1; the row
is `Failed` with reason `server` naming HTTP 500 and the server's own count of what it received,
retries included; no figure of 0 ms appears in results.csv, results.json, the terminal or
report.html; and the worker's last request came within the job's duration plus its retries' back-off
(3.5 s), not after a lapsed lease. An endless stream (tests/kit/hostile.py) is cut where its answer
passes what the request's `max_tokens` can carry and named the same way, its heartbeats never missed.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from kit import zygote
from kit.procs import SARK
from kit.sse_server import Reply, serve_sse

HOSTILE = Path(__file__).resolve().parents[2] / "kit" / "hostile.py"
RATE, DURATION_S = 2.0, 5.0
BACKOFF_S = 0.5 + 1.0 + 2.0  # the default retry policy's waits after a first 500
ZERO_MS = re.compile(r"(?<![\d.])0(?:\.0+)?\s*ms\b")


def test_a_server_that_fails_every_request_fails_the_job_naming_it(tmp_path: Path) -> None:
    at: list[float] = []

    def boom(body: dict[str, object], attempt: int) -> Reply:
        at.append(time.monotonic())
        return Reply(status=500, headers=(("content-type", "application/json"),), pieces=((0.0, b"{}"),))

    endpoint = {"url": "", "model": "broken"}
    generate = {
        "prompts": "builtin:summaries",
        "max_new_tokens": 4,
        "request_rate": RATE,
        "duration_s": DURATION_S,
    }
    with serve_sse(boom) as server:
        endpoint["url"] = server.url
        campaign = tmp_path / "broken.yaml"
        campaign.write_text(
            json.dumps({"name": "broken", "jobs": [{"endpoint": endpoint, "generate": generate}]})
        )
        args = [*SARK, "submit", str(campaign), "--workers", "1", "--wait-peers", "1"]
        args += ["--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")]
        args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false", "COLUMNS": "200"}
        done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        received = len([s for s in server.seen if s.path.endswith("/chat/completions")])
    assert done.returncode == 1, done.stderr[-3000:]
    assert received > 0
    assert at[-1] - at[0] <= DURATION_S + BACKOFF_S + 2.0  # the run's own time, never a lease's

    out = tmp_path / "out"
    [csv_path] = out.rglob("results.csv")
    with csv_path.open(newline="") as f:
        [row] = list(csv.DictReader(f))
    print(row["Detail"], f"(the server counted {received}; first to last {at[-1] - at[0]:.1f} s)")
    assert (row["Status"], row["FailureReason"]) == ("Failed", "server"), row
    assert re.match(r"all \d+ requests failed: HTTP 500 x\d+; the server received \d+", row["Detail"]), row
    said = int(re.search(r"the server received (\d+)", row["Detail"]).group(1))  # type: ignore[union-attr]
    assert said == received  # the server's own count, retries included

    terminal = done.stdout + done.stderr
    assert "HTTP 500" in terminal
    texts = {
        "results.csv": csv_path.read_text(),
        "results.json": next(out.rglob("results.json")).read_text(),
        "report.html": next(out.rglob("report.html")).read_text(),
        "terminal": terminal,
    }
    for name, text in texts.items():
        assert not ZERO_MS.search(text), (name, ZERO_MS.search(text))
    for figure in ("TtftMsMedian", "TpotMsMedian", "E2eMsMedian", "InferenceMsMedian", "LoadMsMedian"):
        assert row[figure] == "", (figure, row[figure])

    # the task ran on the server, not on the worker's CPU: the terminal's ending and `status` say so
    assert "Endpoint (black-box): failed" in terminal
    assert "CPU (ONNX)" not in terminal
    listing = [*SARK, "status", "--json", "--data-dir", str(tmp_path / "data")]
    [campaign_id] = [c["campaign_id"] for c in json.loads(_run(listing, env, tmp_path))["campaigns"]]
    shown = _run([*SARK, "status", campaign_id, "--data-dir", str(tmp_path / "data")], env, tmp_path)
    assert "Endpoint (black-box)" in shown, shown
    assert "CPU (ONNX)" not in shown, shown


def _run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """A sark-node command's standard output (it must succeed)."""
    done = zygote.run(args, capture_output=True, text=True, timeout=60, env=env, cwd=cwd, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_an_endless_stream_is_cut_by_the_workers_budget_and_named_never_a_lapsed_lease(
    tmp_path: Path,
) -> None:
    """A closed loop of 4 against a server whose every answer is an endless valid stream
    (tests/kit/hostile.py): each is cut where its answer passes what 4 tokens can carry
    (`drivers.endpoint.attempt.MAX_TOKEN_CHARS`), however slowly a busy machine reads it (the run's
    budget, a million pieces, was not reached in the duration and drain at load 4, and the job ended
    `timeout`), its loop (and heartbeats) go on, and the job ends Failed `server` naming
    `response_too_large`, counted as the server counted."""
    hostile = subprocess.Popen(
        [sys.executable, "-P", str(HOSTILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert hostile.stdout is not None
        root = hostile.stdout.readline().split()[1]
        load = {"prompts": "builtin:summaries", "max_new_tokens": 4, "concurrency": 4, "duration_s": 3}
        job = {"endpoint": {"url": f"{root}/endless/v1", "model": "endless"}, "generate": load}
        campaign = tmp_path / "endless.yaml"
        campaign.write_text(json.dumps({"name": "endless", "jobs": [job]}))
        args = [*SARK, "submit", str(campaign), "--json", "--workers", "1", "--wait-peers", "1"]
        args += ["--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")]
        args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false"}
        done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        received = json.loads(httpx.get(f"{root}/seen", timeout=10).text)["endless"]
    finally:
        assert hostile.stdin is not None
        assert hostile.stdout is not None
        hostile.stdin.close()
        hostile.kill()
        hostile.wait(10)
        hostile.stdout.close()
    assert done.returncode == 1, done.stderr[-3000:]
    files = json.loads(done.stdout.strip().splitlines()[-1])["files"]
    with open(files["csv"], newline="") as f:
        [row] = list(csv.DictReader(f))
    print(row["Detail"], f"(the server counted {received})")
    assert (row["Status"], row["FailureReason"]) == ("Failed", "server"), row
    # each stream is cut at its answer's bound; one still being read at the duration's end plus the
    # drain (drivers.endpoint.options.DRAIN_S) would end `deadline`: the server's fault either way
    said = re.match(r"all (\d+) requests failed: ([a-z_ x\d,]+); the server received", row["Detail"])
    assert said, row
    kinds = dict(part.rsplit(" x", 1) for part in said.group(2).split(", "))
    assert set(kinds) <= {"response_too_large", "deadline"}, row
    assert int(kinds.get("response_too_large", "0")) >= 1, row
    assert sum(int(n) for n in kinds.values()) == int(said.group(1)), row
    assert row["Detail"].endswith(f"the server received {received}, retries included")
