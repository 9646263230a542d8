"""Issue 41, scope 6 (d): `sark-node report CAMPAIGN`, as README writes it, writes report.html beside the
campaign's other files (`sark-results/<campaign>/`, where `submit` wrote them), whichever folder it is
run from; it used to write `<campaign>-report.html` into the current folder. Both hold the roofline
(issue 53): the model counted on the submitter, `report` by id counting it again from the node's cache;
by results.json path there is no count, and no roofline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from kit.procs import SCRIPT

ROOT = Path(__file__).resolve().parents[3]
COUNTED = re.compile(r"tiny-convnet\.onnx · CPU \(ONNX\).*?</td><td class=\"num\">([\d.e+]+)</td>")
CAMPAIGN = """name: report-beside
model:
  path: models/tiny-convnet.onnx
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 20
    warmup_runs: 2
"""


def _sark(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCRIPT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_report_writes_beside_the_campaigns_files_from_any_folder(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "models").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(ROOT / "examples" / "models" / "tiny-convnet.onnx", work / "models")
    (work / "campaign.yaml").write_text(CAMPAIGN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    submitted = _sark(work, env, "submit", "campaign.yaml")
    assert submitted.returncode == 0, submitted.stderr
    found = re.search(r"campaign (campaign-\d+)", submitted.stdout)
    assert found is not None, submitted.stdout
    campaign_id = found.group(1)
    folder = work / "sark-results" / campaign_id
    written = (folder / "report.html").read_text()
    assert "<h2>Roofline</h2>" in written
    counted = COUNTED.search(written)  # GFLOP per inference, counted on the submitter
    assert counted is not None, written[written.index("<h2>Roofline</h2>") :][:2000]
    (folder / "report.html").unlink()  # so that the one there now is report's

    reported = _sark(elsewhere, env, "report", campaign_id)
    assert reported.returncode == 0, reported.stderr
    assert reported.stdout.strip() == str(folder / "report.html")
    again = (folder / "report.html").read_text()
    assert "<html" in again.lower()
    recounted = COUNTED.search(again)
    assert recounted is not None
    assert recounted.group(1) == counted.group(1)
    assert list(elsewhere.iterdir()) == []  # nothing in the folder it was run from
    by_path = _sark(elsewhere, env, "report", str(folder / "results.json"))
    assert by_path.returncode == 0, by_path.stderr
    assert by_path.stdout.strip() == str(folder / "report.html")
    assert "<h2>Roofline</h2>" not in (folder / "report.html").read_text()  # results.json holds no count
