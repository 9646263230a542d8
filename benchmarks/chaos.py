"""The chaos report: each fault scenario of tests/faults run once more, with its figures.

    sudo .venv/bin/python benchmarks/chaos.py [--repeat 1] [--only kill9,freeze]

Needs root (network namespaces). For every fault a fresh namespace lab: a gate, the model server and
the submitter in h1, real `sark-node join` workers in h2 and h4 (heartbeat 0.5 s, lease 3 s), one
task measured half-way when the fault strikes (tests/kit/fleet.py `run_fault`), then the lossy,
delayed and capped network (`run_impaired`). Figures come from the processes' event lines:

    detection   fault injected -> the submitter's `lapsed` event (`sigterm`: its `released` event, the
                worker's signed hand-back on a graceful leave)
    re-dispatch `lapsed` (or `released`) -> the task's next `committed` on another worker
    completed / lost / stale rejected   from the final CSV and the submitter's tally

Prints a table and writes benchmarks/out/chaos.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# the repository root first: tests/ holds folders named after the packages (tests/protocol), which
# would otherwise be imported as namespace packages in place of an installed sark-node
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kit.faults import Faults  # noqa: E402
from kit.fleet import FAULTS, H4, LEAVES, FaultNet, Fleet, run_fault, run_impaired  # noqa: E402
from kit.netns import H2  # noqa: E402
from kit.procs import Lab  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "chaos.json"
COLUMNS = ("fault", "detection_s", "redispatch_s", "tasks", "completed", "lost", "stale_rejected")


def scenario(run: Callable[[Fleet], dict[str, Any]]) -> dict[str, Any]:
    """One fresh lab, two workers, one scenario; always torn down."""
    root = Path(tempfile.mkdtemp(prefix="sark-chaos-"))
    net = FaultNet()
    lab = Lab(root, record_ttl=30.0)
    try:
        net.up()
        with Faults(net) as faults:
            try:
                fleet = Fleet.start(net, lab, faults)
                fleet.worker("w-h2", net.h2, H2)
                fleet.worker("w-h4", net.h4, H4)
                return run(fleet)
            finally:
                faults.undo_all()
                lab.close()
    finally:
        net.down()
        shutil.rmtree(root, ignore_errors=True)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    head = ["fault", "detection (s)", "re-dispatch (s)", "tasks", "completed", "lost", "stale rejected"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = ["n/a" if row.get(c) is None else str(row[c]) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Run the scenarios, print the table, write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--only", default="", help="comma-separated faults (default: all, sigterm, and the impaired net)"
    )
    args = parser.parse_args()
    wanted = [f for f in args.only.split(",") if f] or [*FAULTS, *LEAVES, "impaired"]
    rows: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        for kind in wanted:
            run = run_impaired if kind == "impaired" else (lambda fleet, k=kind: run_fault(fleet, k))
            row = scenario(run)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print(table(rows))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"heartbeat_s": 0.5, "lease_ttl_s": 3.0, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
