"""Discovery time: a gate and N `join` processes; time from a fresh node's start until it has every advert.

Prints a table and writes benchmarks/out/discovery.json. Run: .venv/bin/python benchmarks/discovery.py [N ...]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests" / "node"))

import subprocess

from conftest_data import make_profile
from lab.procs import SARK, Lab


def fresh_lookup(gates: list[str], root: Path, expected: set[str]) -> tuple[float, int]:
    """Start a fresh `peers` process; seconds from its start until it printed every advert."""
    args = [*SARK, "peers", "--json", "--data-dir", str(root / f"fresh-{time.monotonic_ns()}")]
    for gate in gates:
        args += ["--gate", gate]
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    elapsed = time.monotonic() - start
    found = {p["peer_id"] for p in json.loads(out.stdout.strip().splitlines()[-1])["peers"]}
    return elapsed, len(found & expected)


def run(n: int, repeats: int = 3) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        profile = root / "profile.json"
        profile.write_text(make_profile().model_dump_json())
        lab = Lab(root)
        try:
            t0 = time.monotonic()
            gates = lab.gate().ready["addrs"]
            ids = {lab.worker(f"w{i}", gates, profile, timeout=120).ready["peer_id"] for i in range(n)}
            settle = time.monotonic() - t0
            runs = [fresh_lookup(gates, root, ids) for _ in range(repeats)]
        finally:
            lab.close()
    times = [t for t, _ in runs]
    return {
        "n": n,
        "start_all_s": round(settle, 2),
        "lookup_s": [round(t, 3) for t in times],
        "median_s": round(statistics.median(times), 3),
        "found": [f for _, f in runs],
    }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [5, 10, 20]
    rows = [run(n) for n in sizes]
    print(f"{'N':>4} {'start all (s)':>14} {'fresh node -> all adverts, median (s)':>38} {'found':>12}")
    for r in rows:
        print(f"{r['n']:>4} {r['start_all_s']:>14} {r['median_s']:>38} {r['found']!s:>12}")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "discovery.json").write_text(json.dumps({"time": time.time(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
