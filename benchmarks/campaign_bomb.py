"""What a hostile campaign file costs `sark-node submit` before its error, beside an honest bad one.

    .venv/bin/python benchmarks/campaign_bomb.py [--repeat 3]

Each file goes to a fresh `sark-node submit` process (no gate: it must fail validation before any
swarm starts). Figures per file: exit code, wall time of the whole process (mostly the CLI's
imports), its peak RSS (`wait4` rusage), and the time and traced peak of `parse_campaign` alone in
this process. The baseline is a campaign with one misspelt field, validated on the same path in
the same run; the bombs are a 9-level YAML billion laughs, a recursive alias and a 27,000-job sweep.
Prints a table and writes benchmarks/out/campaign_bomb.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

from kit.badfiles import BILLION_LAUGHS  # noqa: E402

from scheduler import CampaignError, parse_campaign  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "campaign_bomb.json"
CLI = [sys.executable, "-c", "from node.cli import main; main()"]
VALUES = "[" + ",".join(str(i) for i in range(1, 31)) + "]"
FILES = {
    "baseline (misspelt field)": "model: {path: m.onnx}\njobs: [{compute_unit: CPU (ONNX), num_runs: 5}]\n",
    "billion laughs": BILLION_LAUGHS,
    "recursive alias": "jobs: &j [1, *j]\nmodel: {path: m.onnx}\n",
    "sweep of 27,000 jobs": (
        "model: {path: m.onnx}\njobs:\n  - {compute_unit: CPU (ONNX), sweep: {num_inference_runs: "
        f"{VALUES}, warmup_runs: {VALUES}, load_runs: {VALUES}}}}}\n"
    ),
}


def run_once(path: Path, data_dir: Path) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak RSS MiB) of one `sark-node submit` process."""
    env = os.environ | {"SARK_DATA_DIR": str(data_dir)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, "submit", str(path)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    assert proc.stderr is not None
    proc.stderr.read()
    proc.stderr.close()
    return os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss / 1024


def parse_cost(text: str) -> tuple[float, float]:
    """(milliseconds, traced peak MiB) of parse_campaign on `text`, in this process."""
    tracemalloc.start()
    start = time.perf_counter()
    with contextlib.suppress(CampaignError):
        parse_campaign(text)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed * 1000, peak / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in FILES.items():
            path = Path(tmp) / "campaign.yaml"
            path.write_text(text)
            runs = [run_once(path, Path(tmp) / "data") for _ in range(args.repeat)]
            parse_ms, parse_mib = parse_cost(text)
            rows.append(
                {
                    "file": name,
                    "bytes": len(text.encode()),
                    "exit": sorted({r[0] for r in runs}),
                    "wall_s": statistics.median(r[1] for r in runs),
                    "peak_rss_mib": max(r[2] for r in runs),
                    "parse_ms": parse_ms,
                    "parse_peak_mib": parse_mib,
                }
            )
    print(
        f"{'file':28} {'bytes':>6} {'exit':>5} {'wall s':>7} {'RSS MiB':>8} {'parse ms':>9} {'parse MiB':>10}"
    )
    for r in rows:
        print(
            f"{r['file']:28} {r['bytes']:>6} {r['exit']!s:>5} {r['wall_s']:>7.2f} {r['peak_rss_mib']:>8.1f}"
            f" {r['parse_ms']:>9.2f} {r['parse_peak_mib']:>10.3f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
