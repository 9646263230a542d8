"""report.html's drawing, side by side: the telemetry timelines on fixed margins against the same
figures laid out by matplotlib's constrained layout and cropped on save (as before).

A real campaign first: `sark-node submit` on an embedded swarm of one worker, `--tasks` small ONNX
jobs one at a time, each with its telemetry (the timelines report.html draws, at most
`node.report.telereport.MAX_FIGURES`). Then, in this process, each round renders the page both ways in
turn, so that the machine's load falls on both alike: `render_html` as it is, and with every timeline
switched back to the constrained layout and the cropped save. The figures are the median CPU time of
a render (what a submitter pays after its campaign ends) and the ratio now / before. Prints a table
and writes benchmarks/out/report_render.json.

    .venv/bin/python benchmarks/report_render.py [--tasks 12] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import node.report.telereport as telereport  # noqa: E402
from node.report.pictures import svg_of  # noqa: E402
from node.report.render import render_html  # noqa: E402
from scheduler.results import CampaignReport  # noqa: E402

MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"


def _campaign(root: Path, tasks: int) -> CampaignReport:
    """The results of a real campaign of `tasks` small ONNX jobs on an embedded swarm."""
    job = {"compute_unit": "CPU (ONNX)", "devices": 1, "num_inference_runs": 50, "warmup_runs": 2,
           "load_runs": 1, "processes": 1, "threads": 1}  # fmt: skip
    (root / MODEL.name).write_bytes(MODEL.read_bytes())
    body = {"name": "render", "model": {"path": MODEL.name}, "max_inflight": 1, "jobs": [job] * tasks}
    (root / "c.yaml").write_text(yaml.safe_dump(body))
    sark = [sys.executable, "-P", "-c", "from node.cli import main; main()"]
    done = subprocess.run(
        [*sark, "submit", "c.yaml", "--workers", "1", "--json", "--out", "out"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"the campaign failed ({done.returncode}): {done.stderr[-2000:]}")
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())


def _before(figure: Any, salt: str, *, crop: bool = True) -> str:
    """A timeline as it was drawn: laid out by the constrained layout, cropped on save (whatever
    `crop` the timeline now asks)."""
    figure.set_layout_engine("constrained")
    return svg_of(figure, salt, crop=True)


def _as_before() -> contextlib.AbstractContextManager[Any]:
    """Every timeline of a render drawn as before (`_before`)."""
    return mock.patch.object(telereport, "svg_of", _before)


def _render(report: CampaignReport) -> tuple[float, str]:
    """(CPU s, the page) of one render."""
    start = time.process_time()
    page = render_html(report)
    return time.process_time() - start, page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = _campaign(Path(tmp), args.tasks)
    # matplotlib imported and its fonts found once, outside the rounds; the page says what it drew
    timelines = _render(report)[1].count('class="telemetry"')
    cpu: dict[str, list[float]] = {"before": [], "now": []}
    for _ in range(args.rounds):
        with _as_before():
            cpu["before"].append(_render(report)[0])
        cpu["now"].append(_render(report)[0])
    before, now = statistics.median(cpu["before"]), statistics.median(cpu["now"])
    result = {
        "tasks": args.tasks, "timelines": timelines, "rounds": args.rounds,
        "render_cpu_s": {"before": before, "now": now}, "ratio": now / before, "samples": cpu,
    }  # fmt: skip
    print(f"report.html of {args.tasks} tasks ({timelines} timelines), median CPU of {args.rounds} renders:")
    print(f"  constrained layout, cropped (before)  {before:6.3f} s")
    print(f"  fixed margins, drawn once (now)       {now:6.3f} s")
    print(f"  now / before                          {now / before:6.3f}x")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "report_render.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
