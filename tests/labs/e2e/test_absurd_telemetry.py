"""Issue 29: one allowed worker's absurd telemetry stops no output, under `submit` or `serve`.

The hot liar is the real `sark-node join` (tests/kit/hotliar.py wraps only its `drivers.measure`): it
measures for real, then every telemetry reading alternates +1e308 / -1e308 (MHz, °C, W), its figures
derived again so that the result is self-consistent, and signs it with its own key. Beside it an
honest worker takes the same job (`devices: all`). Before this issue report.html's telemetry plot
raised, `submit` wrote none of its three files and `serve` exited.

Whatever the submitter decides about such telemetry (drawn with the readings left out and counted
today; refused at acceptance, naming the field, once physical bounds check it), the campaign ends
as a campaign does: the honest row is Complete, all three files exist, and `serve` answers
`/api/health` throughout and after.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kit import zygote
from kit.campaignlab import (
    MODEL,
    ROOT,
    CampaignLab,
    Health,
    Swarm,
    campaign_end,
    submitter_id,
    write_campaign,
)
from kit.procs import SARK, Proc

HOT = ROOT / "tests" / "kit" / "hotliar.py"
JOB = {
    "compute_unit": "CPU (ONNX)",
    "devices": "all",
    "num_inference_runs": 20,
    "warmup_runs": 2,
    "load_runs": 1,
    "processes": 1,
}
TELEMETRY_FIELDS = re.compile(r"telemetry|cpu_mhz|temp_c|gpu_power_w|gpu_sm_mhz|gpu_temp_c")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    """A gate, an honest worker and the hot liar, both taking offers from one submitter identity:
    shared by the module's two tests, each a campaign of its own (`submit`, then `serve`) that kills
    nothing and reads only its own campaign's rows."""
    tmp_path = tmp_path_factory.mktemp("hotswarm")
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        honest = lab.real_worker("honest", [gate], me, wait=False)
        hot = lab.real_worker("hot", [gate], me, wait=False, program=[sys.executable, str(HOT)])
        for proc in (honest, hot):
            proc.ready = proc.wait_event("ready", 90)
        workers = {proc.ready["peer_id"]: proc for proc in (honest, hot)}
        names = {"honest": honest.ready["peer_id"], "hot": hot.ready["peer_id"]}
        yield Swarm(lab, gate, workers, submitter_dir, tmp_path, names)
    finally:
        lab.close()


def _check_outputs(files: dict[str, str], swarm: Swarm) -> list[dict[str, str]]:
    """All three files exist; the honest row is Complete; the liar's telemetry is either drawn with
    its readings left out and counted (or a note where its picture could not be drawn), or refused
    with a reason naming the field."""
    for kind in ("csv", "json", "html"):
        assert Path(files[kind]).is_file(), files
    with open(files["csv"], newline="") as f:
        rows = {row["WorkerPeerId"]: row for row in csv.DictReader(f)}
    assert rows[swarm.names["honest"]]["Status"] == "Complete", rows[swarm.names["honest"]]
    hot = rows[swarm.names["hot"]]
    page = Path(files["html"]).read_text()
    if hot["Status"] == "Complete":
        said = re.search(
            r"<figcaption>\d+ readings not drawn[^<]*</figcaption>|<p class=\"note\">telemetry", page
        )
        assert said is not None, "report.html names no telemetry it could not draw"
    else:
        assert TELEMETRY_FIELDS.search(hot["Detail"]), hot
    assert json.loads(Path(files["json"]).read_text())["results"]
    return list(rows.values())


def test_submit_writes_every_file_despite_absurd_telemetry(lab: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(
        tmp_path / "c.yaml", {"name": "hot", "model": {"path": MODEL.name}, "jobs": [JOB]}
    )
    done = lab.run("submit", str(campaign), "--json", "--wait-peers", "2", "--out", str(tmp_path / "out"))
    assert "Traceback" not in done.stderr, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    rows = _check_outputs(outcome["files"], lab)
    assert len(rows) == 2
    complete = all(row["Status"] == "Complete" for row in rows)
    assert done.returncode == (0 if complete else 1), done.stderr  # as for any campaign: 1 if a task failed
    cid, again = outcome["campaign_id"], tmp_path / "again.html"
    for args in (
        [cid, "--format", "html", "--out", str(again)],
        [cid, "--format", "md"],
        [cid, "--format", "csv"],
        ["--diff", cid, cid],
    ):
        command = [*SARK, "report", *args, "--data-dir", str(lab.submitter_dir)]
        shown = zygote.run(command, capture_output=True, text=True, timeout=120)
        assert (shown.returncode, shown.stderr) == (0, ""), args  # `report ID` re-renders it, every view
    first = Path(outcome["files"]["html"]).read_text()
    assert again.read_text().count("<figure") == first.count("<figure")


def _serve(lab: Swarm, out: Path) -> tuple[Proc, str]:
    """`sark-node serve` over the lab's gate with the submitter's identity, once it sees both workers."""
    network = ["--allow-http", "--allow-network", "127.0.0.0/8", "--refresh", "0.5"]
    where = ["--data-dir", str(lab.submitter_dir), "--gate", lab.gate, "--out", str(out)]
    served = lab.lab.submitter(["serve", "--http", "127.0.0.1:0", "--events", *where, *network])
    url: str = served.wait_event("http", 90)["url"]
    while served.wait_event("peers", 90)["count"] < 2:
        pass
    return served, f"{url}/api"


def test_serve_keeps_answering_and_writes_the_campaign(lab: Swarm, tmp_path: Path, model_server: str) -> None:
    served, api = _serve(lab, tmp_path / "served")
    health = Health(api)
    try:
        body = {"name": "hot", "model_url": f"{model_server}/{MODEL.name}", "jobs": [JOB]}
        created = httpx.post(f"{api}/campaigns", json=body, timeout=60)
        assert created.status_code == 201, created.text
        cid = created.json()["campaign_id"]
        ended = campaign_end(served, cid, 240)
        shown = httpx.get(f"{api}/campaigns/{cid}", timeout=30).json()
        after = httpx.get(f"{api}/health", timeout=30)
    finally:
        health.stop()
    assert served.popen.poll() is None, served.log_excerpt()  # serve is still running
    assert after.status_code == 200
    assert health.asked > 0
    assert health.failed == []
    if ended["event"] == "campaign_done":
        assert shown["status"] == "completed", shown
        _check_outputs(ended["files"], lab)
    else:  # the files could not be written: the campaign says why, the server goes on
        assert shown["status"] == "failed"
        assert shown["error"].startswith("outputs not written: "), shown
