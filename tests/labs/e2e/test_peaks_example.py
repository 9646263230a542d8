"""Issue 53: peaks as a campaign job kind, end to end on the embedded swarm, as docs/guide/peaks.md
writes it (the block after its `peaks-campaign-command` marker: `sark-node submit examples/peaks.yaml`).

The console script runs in a copy of examples/ with a fresh HOME, on two embedded workers. The copy's
peaks block is cut to a quick look (fp32 and int8 to n = 512, copy at 64 MiB: the `largest_n` and
`largest_mib` caps a campaign may set; the example itself sweeps to the plateau,
tests/unit/scheduler/language/test_peaks.py). Each worker measures each figure in its own task over
the real dispatch; the submitter derives each figure again from the signed timings. What the lab
holds: exit 0, one Complete row per device x figure with its figure in the right column, each
figure in results.json equal to the kernel's work over the fastest of its timed calls (recomputed
here from the raw parts), the peaks table in the terminal and in report.html, the latency views
without the peaks rows, and `sark-node verify` deriving every signed result again.
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kit.procs import SCRIPT, user_env

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "guide" / "peaks.md"
QUICK = {"precisions": ["fp32", "int8"], "memory": ["copy"], "largest_n": 512, "largest_mib": 64}


def _command() -> list[str]:
    lines = GUIDE.read_text().splitlines()
    at = lines.index("<!-- peaks-campaign-command -->")
    assert lines[at + 1] == "```bash"
    return shlex.split(lines[at + 2])


def _quick_copy(folder: Path) -> None:
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("hub", "models"))
    path = folder / "examples" / "peaks.yaml"
    campaign = yaml.safe_load(path.read_text())
    campaign["jobs"][0]["peaks"] = QUICK
    path.write_text(yaml.safe_dump(campaign))


def _run(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = user_env(folder / "home") | {"COLUMNS": "200"}
    return subprocess.run([*SCRIPT, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=240)


def test_the_guides_command_submits_the_example() -> None:
    assert _command() == ["sark-node", "submit", "examples/peaks.yaml"]


def test_each_worker_measures_each_figure_and_the_submitter_derives_it_again(tmp_path: Path) -> None:
    _quick_copy(tmp_path)
    done = _run(tmp_path, *_command()[1:], "--workers", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = (tmp_path / "sark-results").iterdir()
    with (folder / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["PeakPrecision"], r["DeviceName"]) for r in rows) == sorted(
        (p, d) for p in ("fp32", "int8", "copy") for d in {r["DeviceName"] for r in rows}
    )
    assert len({r["DeviceName"] for r in rows}) == 2
    for row in rows:
        assert row["Status"] == "Complete", row
        figure = "PeakGbs" if row["PeakPrecision"] == "copy" else "PeakGops"
        assert float(row[figure]) > 0, row
        assert row["PeakGbs" if figure == "PeakGops" else "PeakGops"] == ""
        assert row["InferenceMsMedian"] == ""  # it timed no model
        assert row["PeakSize"].startswith("64 MiB" if figure == "PeakGbs" else "n=")

    results = json.loads((folder / "results.json").read_text())
    for task in results["results"]:
        run = task["signed"]["measurement"]["peak_run"]
        size, times = run["size"], run["times_s"]
        work = 2 * size if run["peak"]["precision"] == "copy" else 2.0 * size**3
        assert run["batch"] == 1
        assert len(times) >= 5
        assert run["peak"]["per_s"] == pytest.approx(work / min(times) / 1e9, rel=1e-12)
        assert size <= (64 << 20 if run["peak"]["precision"] == "copy" else 512)

    assert "peaks per unit and precision" in done.stdout
    assert "GFLOPS" in done.stdout
    assert "GOPS" in done.stdout
    html = (folder / "report.html").read_text()
    assert 'id="peaks"' in html
    assert "Peaks per unit and precision" in html
    assert "inference latency" not in html  # no latency matrix of the peaks' pseudo-models

    checked = _run(tmp_path, "verify", str(folder))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "6 signed result(s) derived again" in checked.stdout
