"""Issue 42, scope 5: performance per dollar and per watt, on a real campaign over a loopback swarm.

Four real `sark-node join` workers take a tensor job and a model-server job (a scripted
OpenAI-compatible server on 127.0.0.1), each on every worker (`devices: all`): `owner` advertises its own
price (`--price-per-hour 0.8`); `priced` advertises 0.1 but the campaign prices it by its peer id at
2.5 (the campaign's word wins); two liars are the real join with their price patched in memory
(tests/kit/priceliar.py): `changer` advertises 3 and signs a result whose device asks 0.001 (it is
costed at the higher word, and the row says both), `absurd` asks -5 in its advert and its result
(refused, the row says why, no cost shown). The prices and their sources are shown in results.csv,
the terminal table `submit` ends with, report.html, `report --format md` (ranked) and
`report --diff` (text and JSON, ranked), the model-server rows' cost per million output tokens in the
LLM view too; every renderer survives the liars.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import zygote
from kit.campaignlab import MODEL, ROOT, CampaignLab, Swarm, submitter_id, write_campaign
from kit.procs import SARK
from kit.sse_server import scheduled, serve_sse

LIAR = ROOT / "tests" / "kit" / "priceliar.py"
JOB = {
    "compute_unit": "CPU (ONNX)",
    "devices": "all",
    "num_inference_runs": 20,
    "warmup_runs": 2,
    "load_runs": 1,
    "processes": 1,
}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Swarm]:
    """A gate, two honest workers with an owner's price and two price liars, all for one submitter."""
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        submitter_dir = tmp_path / "submitter"
        me = submitter_id(submitter_dir)
        gate = lab.gate().ready["addrs"][0]
        liar = [sys.executable, str(LIAR)]
        procs = {
            "owner": lab.real_worker("owner", [gate], me, wait=False, extra=["--price-per-hour", "0.8"]),
            "priced": lab.real_worker("priced", [gate], me, wait=False, extra=["--price-per-hour", "0.1"]),
            "changer": lab.real_worker("changer", [gate], me, wait=False, program=[*liar, "3", "0.001"]),
            "absurd": lab.real_worker("absurd", [gate], me, wait=False, program=[*liar, "-5", "-5"]),
        }
        for proc in procs.values():
            proc.ready = proc.wait_event("ready", 90)
        workers = {proc.ready["peer_id"]: proc for proc in procs.values()}
        names = {name: proc.ready["peer_id"] for name, proc in procs.items()}
        yield Swarm(lab, gate, workers, submitter_dir, tmp_path, names)
    finally:
        lab.close()


def _report(lab: Swarm, *args: str) -> str:
    command = [*SARK, "report", *args, "--data-dir", str(lab.submitter_dir)]
    shown = zygote.run(command, capture_output=True, text=True, timeout=120)
    assert (shown.returncode, shown.stderr) == (0, ""), args
    return shown.stdout


def test_prices_and_costs_reach_every_medium_and_a_liar_is_bounded(lab: Swarm, tmp_path: Path) -> None:
    names = lab.names
    served = {"url": "", "model": "scripted"}
    generate = {"prompts": "builtin:summaries", "max_new_tokens": 4, "num_prompts": 4}
    body = {
        "name": "priced",
        "model": {"path": MODEL.name},
        "jobs": [JOB, {"endpoint": served, "generate": generate, "devices": "all"}],
        "prices": [{"peer": names["priced"], "per_hour": 2.5}],
    }
    reply = scheduled(["a", " b", " c", " d"], first_s=0.05, every_s=0.01, usage=(5, 4))  # TTFT past any RTT
    with serve_sse(lambda body, attempt: reply) as server:
        served["url"] = server.url
        campaign = write_campaign(tmp_path / "c.yaml", body)
        out = ["--wait-peers", "4", "--out", str(tmp_path / "out")]
        done = lab.run("submit", str(campaign), *out, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    cid = re.search(r"^campaign (\S+)$", done.stdout, re.M)
    assert cid is not None, done.stdout
    with open(tmp_path / "out" / cid[1] / "results.csv", newline="") as f:
        every = list(csv.DictReader(f))
    assert {row["Status"] for row in every} == {"Complete"}, [row["Detail"] for row in every]
    rows = {row["WorkerPeerId"]: row for row in every if row["ComputeUnits"] == "CPU (ONNX)"}
    served_rows = {row["WorkerPeerId"]: row for row in every if row["ComputeUnits"] != "CPU (ONNX)"}
    priced = {name: rows[peer] for name, peer in names.items()}

    # results.csv: each price with its source; the cost per 1,000 inferences from the median
    expected = {
        "owner": ("0.8", "owner"),
        "priced": ("2.5", "campaign: peer"),
        "changer": ("3", "owner: the higher of advertised 3, result's device 0.001"),
    }
    for name, (price, source) in expected.items():
        row = priced[name]
        assert (row["PricePerHour"], row["PriceSource"]) == (price, source), row
        median = float(row["InferenceMsMedian"])  # as the file prints it: 3 decimals of a ms
        per_1k = float(price) * median / 3600
        rounding = 0.0005 / median  # a 0.3 ms median (AVX-512) printed to 3 decimals is 0.17 % off
        assert float(row["CostPer1kInferences"]) == pytest.approx(per_1k, rel=1e-3 + rounding), row
    for name, (price, source) in expected.items():  # a model server's row: per million output tokens
        row = served_rows[names[name]]
        assert (row["PricePerHour"], row["PriceSource"]) == (price, source), row
        per_m = float(price) / 3600 / float(row["OutputTokPerS"]) * 1e6
        assert float(row["CostPerMTokens"]) == pytest.approx(per_m, rel=1e-3), row
    assert served_rows[names["absurd"]]["CostPerMTokens"] == ""
    absurd = priced["absurd"]
    assert (absurd["PricePerHour"], absurd["CostPer1kInferences"]) == ("", "")
    assert absurd["PriceSource"].startswith("owner: refused: advertised price -5.0 is outside 0..10000")

    # the terminal (submit's last table), report.html, Markdown ranked, the diff ranked
    assert "performance per dollar and per watt" in done.stdout
    assert "2.5 $/h (campaign: peer)" in done.stdout
    assert "0.8 $/h (owner)" in done.stdout
    page = (tmp_path / "out" / cid[1] / "report.html").read_text()
    assert 'id="cost"' in page
    assert "2.5 $/h (campaign: peer)" in page
    assert "none (owner: refused: advertised price -5.0" in page
    lead = page.split('id="generation-lead"', 1)[1].split("</table>", 1)[0]  # the LLM view
    assert "$ / M output tokens" in lead
    assert "at 2.5 $/h (campaign: peer)" in lead
    md = _report(lab, cid[1], "--format", "md", "--rank", "per_1k_inferences")
    table = md.split("## Performance per dollar and per watt", 1)[1]
    lines = [line.strip("|").split(" | ") for line in table.splitlines() if MODEL.name in line]
    assert len(lines) == 4, table
    costs = [float(cells[4]) for cells in lines[:3]]  # the tensor rows: the first figure ranks
    assert costs == sorted(costs), table  # ranked: the cheapest first (the medians differ under load)
    assert (lines[-1][3].split(" ", 1)[0], lines[-1][4].strip()) == ("none", ""), table  # refused: last
    diff = _report(lab, "--diff", cid[1], cid[1], "--rank", "per_1k_inferences")
    assert "$ / 1k inferences" in diff
    assert "A 2.5 $/h (campaign: peer); B 2.5 $/h (campaign: peer)" in diff
    as_json = json.loads(_report(lab, "--diff", cid[1], cid[1], "--json", "--rank", "per_1k_inferences"))
    metrics = [row["metric"] for row in as_json["rows"]]
    assert metrics.count("$ / 1k inferences") == 3  # the refused price has no cost to compare
    assert _report(lab, cid[1], "--format", "html", "--out", str(tmp_path / "again.html")).strip()
