"""How far an honest device's CPU challenge lands from its own calibration, on this machine, now.

`scheduler.verification.challenge.SLACK` must cover the distance between a device's calibration (the
best repeat of a 512 x 512 float32 product, `drivers.measuring.calibrate`) and one challenge round (X and B
expanded from a seed, the chain's steps, a digest per row: `drivers.measuring.challengechild`, timed as the
submitter times it, less the pipe and network). Each trial calibrates, then runs the three rounds a
submitter would run at the chain sized for that calibration as the claim, and keeps the
best round, as the submitter does; it prints each trial's ratio (best round / calibration) and the
spread over trials, with the machine's load average. A ratio under 1 / SLACK would refuse an honest
device; a 2.5x liar passes only above 2.5 / SLACK (`HONEST_RATIO` is this ratio's quiet median). The
chain runs on one BLAS thread or all, the faster when the trial starts, as the worker's child does.
Writes benchmarks/out/challenge_noise.json.

Usage: .venv/bin/python benchmarks/challenge_noise.py [--trials 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.measuring.calibrate import cpu_gflops  # noqa: E402
from drivers.measuring.challengechild import Kernel, digests  # noqa: E402
from protocol import CHALLENGE_ROUNDS  # noqa: E402
from scheduler.verification import challenge  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "challenge_noise.json"


def trial(seed: int) -> dict[str, float]:
    """One device's calibration against the best of its challenge rounds (in this process)."""
    claimed = cpu_gflops()
    sizing = challenge.size(claimed, 0.0)
    kernel = Kernel()
    kernel.warm()  # one BLAS thread or all of them, the faster now, as the worker's child does
    rounds = []
    for r in range(CHALLENGE_ROUNDS):
        start = time.perf_counter()
        rows = kernel.chained(("chain", sizing.n, sizing.steps, seed * 10 + r))
        assert rows is not None
        digests(rows)
        rounds.append(challenge.gflops(sizing.n, time.perf_counter() - start, 0.0, sizing.steps))
    best = max(rounds)
    load = os.getloadavg()[0]
    shape = {"n": sizing.n, "steps": sizing.steps}
    return {"claimed": claimed, **shape, "best": best, "ratio": best / claimed, "load": load}


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    trials = []
    for k in range(args.trials):
        t = trial(k)
        trials.append(t)
        print(
            f"trial {k}: calibration {t['claimed']:.1f} GFLOPS, n={t['n']:.0f} x {t['steps']:.0f}, "
            f"best round {t['best']:.1f} GFLOPS, ratio {t['ratio']:.2f} (load {t['load']:.1f})",
            flush=True,
        )
    ratios = sorted(t["ratio"] for t in trials)
    print(
        f"ratio min {ratios[0]:.2f}, median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}; an honest "
        f"device passes above {1 / challenge.SLACK:.2f}, a {challenge.LIAR_FACTOR:g}x liar above "
        f"{challenge.LIAR_FACTOR / challenge.SLACK:.2f}"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"slack": challenge.SLACK, "trials": trials}, indent=1))


if __name__ == "__main__":
    main()
