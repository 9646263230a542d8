"""report.html's drawing, side by side: the telemetry timelines written as SVG by hand
(`node.report.stacked`) against the same timelines drawn by matplotlib (as before: five stacked axes
on fixed margins, drawn once; kept here as the baseline, `_matplotlib_timeline`).

A real campaign first: `sark-node submit` on an embedded swarm of one worker, `--tasks` small ONNX
jobs one at a time, each with its telemetry (the timelines report.html draws, at most
`node.report.telereport.MAX_FIGURES`). Then, in this process, each round renders the page both ways in
turn, so that the machine's load falls on both alike: `render_html` as it is, and with every timeline
drawn by matplotlib again. The figures are the median CPU time of
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import node.report.telereport as telereport  # noqa: E402
from node.report.pictures import LEGIBLE, Picture, left_out, plottable, svg_of  # noqa: E402
from node.report.render import render_html  # noqa: E402
from protocol import Measurement  # noqa: E402
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


MARGINS = {"left": 0.075, "right": 0.985, "top": 0.93, "bottom": 0.07, "hspace": 0.25}


def _matplotlib_timeline(label: str, m: Measurement, samples: Sequence[float], salt: str) -> Picture:
    """A timeline as report.html drew it at 8c67fbf5: matplotlib's five stacked axes on
    fixed margins, drawn once through its SVG backend."""
    from matplotlib.figure import Figure

    assert m.telemetry is not None
    t, dropped = plottable(p.t_ms / 1000 for p in m.telemetry.points)
    fig = Figure(figsize=(11.0, 7.0))
    fig.subplots_adjust(**MARGINS)
    axes = fig.subplots(5, 1, sharex=True)
    spans = [w for w in telereport._stretches(m, samples) if w.median_ms is not None]
    if spans:
        edges, bad_edges = plottable([w.start_ms / 1000 for w in spans] + [spans[-1].end_ms / 1000])
        medians, bad_medians = plottable([w.median_ms for w in spans] + [spans[-1].median_ms])
        axes[0].step(edges, medians, where="post")
        dropped += bad_edges + bad_medians
    axes[0].set_ylabel("median ms")
    axes[0].set_title(f"{label}: every {m.telemetry.period_ms:g} ms", fontsize=10, wrap=True)
    for row, name, readings in telereport._series(m):
        ys, bad = plottable(readings)
        dropped += bad
        if any(y is not None for y in readings):
            axes[row].plot(t, ys, label=name)
    for ax, what in zip(axes[1:], ("clock MHz", "temp °C", "power W", "load"), strict=True):
        ax.set_ylabel(what)
        if ax.get_lines():
            ax.legend(loc="best", fontsize=LEGIBLE, ncols=3)
        else:
            ax.text(
                0.5, 0.5, f"no {what.split()[0]} reading on this device", transform=ax.transAxes, ha="center"
            )
    axes[4].set_xlabel("time since the timed phase began (s; processes back to back)")
    return Picture(svg_of(fig, salt, crop=False), left_out(dropped, "readings"))


def _as_before() -> contextlib.AbstractContextManager[Any]:
    """Every timeline of a render drawn as before (`_matplotlib_timeline`)."""
    return mock.patch.object(telereport, "timeline_svg", _matplotlib_timeline)


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
    print(f"  timelines by matplotlib (before)      {before:6.3f} s")
    print(f"  timelines written by hand (now)       {now:6.3f} s")
    print(f"  now / before                          {now / before:6.3f}x")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "report_render.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
