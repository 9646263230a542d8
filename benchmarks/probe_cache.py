"""The device probe with and without its cache (`drivers.probe.cache`), side by side.

A `join` worker or an embedded submit probes the device in a spawned child (`drivers.probe.apart`).
Each round runs four cases in turn, so that the machine's load falls on all of them alike: the probe
as before (an empty cache folder: the child imports every runtime and probes every unit) and the
probe on a warm cache (the facts and units reused), each without calibration (as the labs' workers
run, `--no-calibrate`) and with it (as an embedded submit runs; the calibration itself is cached in
both, as on a second submit). The figures are the median wall time and the median CPU time of the
child (what two busy cores pay), with the ratio cached / uncached. Prints a table and writes
benchmarks/out/probe_cache.json.

    .venv/bin/python benchmarks/probe_cache.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import drivers  # noqa: E402


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def _probe(calibration: Path, kept: Path, calibrate: bool) -> tuple[float, float]:
    """(wall s, the child's CPU s) of one probe."""
    cpu, start = _children_cpu(), time.perf_counter()
    await drivers.detect_profile_apart(calibration, calibrate=calibrate, probe_cache=kept)
    return time.perf_counter() - start, _children_cpu() - cpu


async def _rounds(rounds: int, root: Path) -> dict[str, dict[str, list[float]]]:
    calibration, warm = root / "calibration", root / "warm"
    await _probe(calibration, warm, True)  # both caches filled once: the calibration and the probe
    cases = {
        "uncached, --no-calibrate": (False, False),
        "cached, --no-calibrate": (True, False),
        "uncached, calibrated": (False, True),
        "cached, calibrated": (True, True),
    }
    samples: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in cases}
    for i in range(rounds):
        for name, (cached, calibrate) in cases.items():
            kept = warm if cached else root / f"cold-{i}-{calibrate}"  # a new empty folder: a probe
            wall, cpu = await _probe(calibration, kept, calibrate)
            samples[name]["wall"].append(wall)
            samples[name]["cpu"].append(cpu)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        samples = trio.run(_rounds, args.rounds, Path(root))
    medians = {name: {k: statistics.median(v) for k, v in s.items()} for name, s in samples.items()}
    print(f"{'case':26} {'wall s':>8} {'child CPU s':>12}")
    for name, m in medians.items():
        print(f"{name:26} {m['wall']:8.3f} {m['cpu']:12.3f}")
    ratios = {}
    for mode in ("--no-calibrate", "calibrated"):
        new, old = medians[f"cached, {mode}"], medians[f"uncached, {mode}"]
        ratios[mode] = {k: new[k] / old[k] for k in ("wall", "cpu")}
        print(f"{mode}: cached / uncached = {ratios[mode]['wall']:.3f} wall, {ratios[mode]['cpu']:.3f} CPU")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    report = {"rounds": args.rounds, "medians": medians, "ratios": ratios, "samples": samples}
    (out / "probe_cache.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
