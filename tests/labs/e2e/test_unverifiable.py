"""Issue 38, scopes 5 and 7: `verify:` asked on a one-machine lab without the lab switch.

The user's commands as README writes them (`sark-node plan` and `sark-node submit` on the embedded
swarm, two workers on 127.0.0.1): loopback is one network, so no quorum of two independent peers
exists. `plan` says so before the run, `submit` runs nothing alone: each task ends `Unverifiable`
with the rule and the field that would allow it (`same_host: allow`), exits 1, and its last line
counts what was verified. Every renderer takes the rows: results.csv and results.json, the terminal,
Markdown, report.html, `report --diff` against a real earlier campaign (the tensor golden), and
serve's API shapes of the stored campaign's tasks and results.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from kit import zygote
from kit.campaignlab import MODEL, ROOT, write_campaign
from kit.procs import SARK

from node.http.shapes import ApiJson, breakdown, result, task
from node.submitter.run import restore
from node.submitter.store import CampaignStore
from scheduler import TaskState
from scheduler.results import CampaignReport

GOLDEN = ROOT / "tests" / "golden" / "tensor" / "results.json"
SWITCH = "same_host: allow"


def _sark(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SARK_CALIBRATE": "false"}
    return zygote.run([*SARK, *args], capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


def _strict(body: dict[str, Any]) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(bytes(ApiJson(body).body), parse_constant=refuse)


def test_a_one_machine_lab_without_the_switch_gets_no_figure_and_a_line_naming_it(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "campaign.yaml", {
        "name": "one-machine",
        "model": {"path": str(MODEL)},
        "verify": {"replicas": 2},
        "jobs": [{"compute_unit": "CPU (ONNX)", "num_inference_runs": 10, "processes": 1}],
    })  # fmt: skip
    data = tmp_path / "data"
    swarm = ["--workers", "2", "--wait-peers", "2", "--data-dir", str(data)]

    planned = _sark(tmp_path, "plan", str(campaign), *swarm)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "0 of 2 task(s) placed" in planned.stdout
    assert "unverifiable: verify.replicas: 2" in planned.stdout
    assert SWITCH in planned.stdout

    done = _sark(tmp_path, "submit", str(campaign), *swarm, "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "2 unverifiable" in done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "verification: 0 verified, 2 unverifiable"
    endings = [line for line in lines if ": unverifiable: " in line]
    assert len(endings) == 2
    assert all(SWITCH in line for line in endings)  # the line naming the switch

    (folder,) = (tmp_path / "out").iterdir()
    with open(folder / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Status"] for r in rows] == ["Unverifiable"] * 2
    for row in rows:  # no figure at all: nothing ran alone
        assert row["InferenceMsMedian"] == row["LoadMsMedian"] == ""
        assert row["Verified"] == "unverifiable"
        assert row["FailureReason"] == "no_quorum"
        assert SWITCH in row["Detail"]
    report = CampaignReport.from_json((folder / "results.json").read_text())
    assert [t.row["Status"] for t in report.results] == ["Unverifiable"] * 2

    markdown = _sark(tmp_path, "report", str(folder / "results.json"), "--format", "md")
    assert markdown.returncode == 0, markdown.stderr[-3000:]
    assert "Unverifiable" in markdown.stdout
    page = tmp_path / "page.html"
    html = _sark(tmp_path, "report", str(folder / "results.json"), "--out", str(page))
    assert html.returncode == 0, html.stderr[-3000:]
    assert "Unverifiable" in page.read_text()
    for pair in ((GOLDEN, folder / "results.json"), (folder / "results.json", GOLDEN)):
        diff = _sark(tmp_path, "report", "--diff", str(pair[0]), str(pair[1]), "--json")
        assert diff.returncode == 0, diff.stderr[-3000:]
        assert json.loads(diff.stdout)["rows"]

    store = CampaignStore(data / "campaigns.sqlite")
    record = store.campaign(report.campaign_id)
    assert record is not None
    tasks = restore(record).scheduler.tasks()
    assert {t.state for t in tasks} == {TaskState.UNVERIFIABLE}
    assert breakdown(tasks)["failed"] == 2
    for view, part in zip(tasks, report.results, strict=True):  # serve's API and dashboard shapes
        shown = _strict({"task": task(view), "result": result(part)})
        assert shown["result"]["row"]["Status"] == "Unverifiable"
