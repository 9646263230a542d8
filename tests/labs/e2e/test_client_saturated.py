"""Issue 33: a plain `request_rate` job asking a rate the client cannot hold says so, in every view.

One embedded worker is asked for `RATE` req/s for `DURATION_S` against a stub that answers each
request after `PACE_S`, a time the test sets: far past what one Python process sends on this
machine. The row must say `ClientSaturated` with its reason and the rate it did send, in
results.csv, in the terminal's generation table and in report.html; the backlog is sent late or
counted as unsent, never dropped silently.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from kit import zygote
from kit.procs import SARK
from kit.sse_server import scheduled, serve_sse
from rich.console import Console

from node.report.genreport import generation_table
from scheduler.results import CampaignReport

# The client's send rate and lag are timings of this machine, and load can only lower the rate it
# holds: a lower rate shows more clearly that the asked one cannot be held, so the lab holds beside
# any other work and is not `exclusive`. The task failed at load 16, and again beside the suite at
# load 4 (2026-11-27): the submitter's floor probe (issue 50) took a stub that answered "at once"
# (its own thread's time, 1-3 ms at load) at its quickest of five, 3.08 ms, and refused the worker's
# honest 1.0 ms records under a floor of 1.02 ms. The stub now waits `PACE_S` before it answers, so
# the server's least time is the test's, not the machine's: no record can be under half of it.

RATE, DURATION_S = 5000.0, 0.4  # 2,000 sends at once to a stub (backlog 1,024); one process sent 1,964 req/s
PACE_S = 0.02
"""The stub's wait before each answer: the server's least time, the test's own."""


def test_a_rate_the_client_cannot_hold_is_said_in_every_view(tmp_path: Path) -> None:
    reply = scheduled(["ok"], first_s=PACE_S, usage=(3, 1))
    endpoint = {"url": "", "model": "scripted"}
    generate = {
        "prompts": "builtin:summaries",
        "max_new_tokens": 1,
        "request_rate": RATE,
        "duration_s": DURATION_S,
    }
    with serve_sse(lambda body, attempt: reply) as server:
        endpoint["url"] = server.url
        campaign = tmp_path / "saturate.yaml"
        campaign.write_text(
            json.dumps({"name": "saturate", "jobs": [{"endpoint": endpoint, "generate": generate}]})
        )
        args = [*SARK, "submit", str(campaign), "--json", "--workers", "1", "--wait-peers", "1"]
        args += ["--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")]
        args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false"}
        done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, (done.stderr[-3000:], done.stdout[-3000:])
    files = json.loads(done.stdout.strip().splitlines()[-1])["files"]
    with open(files["csv"], newline="") as f:
        [row] = list(csv.DictReader(f))

    assert row["Status"] == "Complete", row["Detail"]
    print(
        {
            k: row[k]
            for k in ("Requests", "Unsent", "RequestRateAchieved", "ClientCpuMaxPct", "ClientSaturatedReason")
        }
    )
    assert row["RequestRate"] == f"{RATE:g}"
    assert row["ClientSaturated"] == "True", row
    reason = row["ClientSaturatedReason"]
    assert reason, row
    achieved = float(row["RequestRateAchieved"])
    assert 0 <= achieved <= RATE, row  # what it sent within the span, never more than asked
    if achieved == 0:  # a loaded machine: the client wrote no first byte within the span, and says so
        assert "sent 0.0 req/s of" in reason, row
    if achieved >= 0.95 * RATE:  # it nearly kept the rate, late: the verdict is the send lag's
        assert "lag" in reason, row
    assert float(row["ClientCpuMaxPct"]) > 0
    assert float(row["ScheduleLagMsP99"]) >= float(row["ScheduleLagMsP50"]) >= 0
    # every planned send was sent (late) or is counted as unsent: none dropped without a word
    assert int(row["Requests"]) + int(row["Unsent"]) >= 0.9 * RATE * DURATION_S

    console = Console(record=True, width=200)
    table = generation_table(CampaignReport.from_json(Path(files["json"]).read_text()))
    assert table is not None
    console.print(table)
    terminal = console.export_text()
    assert "saturated" in terminal
    assert f"{achieved:.1f} of {RATE:g}" in terminal
    assert reason.split(";")[0] in terminal

    report = Path(files["html"]).read_text()
    assert "client-saturated" in report
    assert f"{achieved:.1f}" in report
    assert reason.split(";")[0].split("(")[0].strip() in report
