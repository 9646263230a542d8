"""`sark-node verify` of a 1,000-row campaign, and the bundle's bytes per row.

The rows are the golden bundle's real results (tests/golden/bundle/: a replicated campaign of the
repository's tiny ONNX model on two embedded workers), each signed again for a task of its own by
one of two lab worker keys, in groups of two replicas as the golden groups were settled, and the
whole sealed by the golden submitter's key: every row a real measurement with its raw parts, so the
verify below derives every figure again, checks 1,000 Ed25519 signatures and recomputes 500 groups.
It must hold (exit 1 otherwise). Side by side in one run: reading the same results.json as a report
(`CampaignReport.from_json`, what `report` and the board pay to read it) is the baseline; the ratio
is verify over it. Also the golden bundle's own rows' bytes by kind (a tensor replica, a capacity
search with its levels' records, a fleet member with its records and deal): what a row of each costs
in bundle.json. Writes benchmarks/out/verify_bundle.json.

    .venv/bin/python benchmarks/verify_bundle.py [--rows 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

OUT = ROOT / "benchmarks" / "out" / "verify_bundle.json"
GOLDEN_JOBS = {0: "tensor replica", 1: "tensor replica", 2: "capacity search", 3: "fleet member"}
"""The golden campaign's jobs (tests/kit/bundlelab.py's CAMPAIGN), by index."""


def _best(rounds: int, run: Any) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="rows of the bundle (even)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best counts")
    args = parser.parse_args()
    from kit.bundlelab import grown

    from node.report.bundles import verify_folder
    from scheduler.results import CampaignReport

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        grown(folder, args.rows)
        proof = verify_folder(folder)
        if not proof.holds:
            sys.exit(f"the built bundle does not hold: {proof.problems[:3]}")
        verify_s = _best(args.rounds, lambda: verify_folder(folder))
        text = (folder / "results.json").read_bytes()
        read_s = _best(args.rounds, lambda: CampaignReport.from_json(text))
        sizes = {name: (folder / name).stat().st_size for name in ("bundle.json", "results.json")}
    figures = {
        "rows": proof.rows,
        "groups": proof.groups,
        "verify_s": round(verify_s, 3),
        "read_report_s": round(read_s, 3),
        "ratio": round(verify_s / read_s, 2),
        "bundle_bytes_per_row": sizes["bundle.json"] // proof.rows,
        "results_bytes_per_row": sizes["results.json"] // proof.rows,
    }
    print("| rows | groups | verify s | read results.json s | ratio | bundle B/row | results.json B/row |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(" | ".join(["", *(str(v) for v in figures.values()), ""]).strip())
    kinds = golden_row_bytes()
    print("golden bundle, bytes per row by kind:", ", ".join(f"{k} {v:,}" for k, v in kinds.items()))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({**figures, "golden_row_bytes": kinds}, indent=1))


def golden_row_bytes() -> dict[str, int]:
    """The golden bundle's rows' canonical JSON bytes, averaged by kind (the seal and peers apart)."""
    from kit.bundlelab import GOLDEN

    from scheduler.results.bundle import canonical

    body = json.loads((GOLDEN / "bundle.json").read_text())["body"]
    kinds: dict[str, list[int]] = {}
    for row in body["rows"]:
        kinds.setdefault(GOLDEN_JOBS[row["job_index"]], []).append(len(canonical(row)))
    return {k: sum(v) // len(v) for k, v in sorted(kinds.items())}


if __name__ == "__main__":
    main()
