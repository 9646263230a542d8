"""False claims (`replication_sim.py --strategy claims`): a calibration 1.5-8x the device's true speed,
judged by the scheduler's own checks, in the order discovery and the challenger apply them.

A fleet of `--peers` in `--classes` classes (real `DeviceProfile`s, `replication_fleet.profile_of`);
class c's devices compute (40 + 40 c) GFLOPS, each board 1 % apart; an honest peer advertises its own
figure, a cheater (`--cheaters` of them) a factor drawn from 1.5-8 times it. Each claim goes first
through `scheduler.verification.claims.claim_problems` (physics, and the median of the other peers of
its device class, as `node.submitter.discovery.claims_of` groups them), then, if believed so far,
through the challenge (`scheduler.verification.challenge`): the chain sized for the claim
(`challenge.size`, over a 1 ms round trip), timed as a device of the true speed would compute it, its
best round at a ratio to its calibration drawn from what `benchmarks/challenge_noise.py` measured on
this machine, less the credited trip (`challenge.gflops`), and judged by `challenge.passes`. A peer
refused by either is `claim_unverified`: never placed under `verify: {unverified: refuse}`.

Each claim is judged twice: with the cheater's class's CPU name (the class median can see it), and
with a CPU name of its own (a class of one: only physics and the challenge can).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from replication_fleet import BOARD_CV, UNIT, profile_of

from protocol import DeviceProfile
from scheduler.language import Draws
from scheduler.verification import challenge, claim_problems, device_class

RTT_S = 0.001
"""The round trip the submitter measured to the worker (a LAN)."""
BINS = ((1.0, 1.0), (1.5, 2.0), (2.0, 2.5), (2.5, 3.0), (3.0, 4.0), (4.0, 6.0), (6.0, 8.0))
"""Claimed factors over the true speed, reported apart (1.0: honest claims)."""


@dataclass(frozen=True)
class Judged:
    """One peer's claim and what the scheduler made of it.

    Attributes:
        factor: its claim over its true speed (1.0 honest).
        problems: why `claims.claim_problems` refused it (physics, class), else ().
        measured: its challenge's figure (0 when the claims check already refused it).
        believed: placed under `unverified: refuse`.
    """

    factor: float
    problems: tuple[str, ...]
    measured: float
    believed: bool


def judge_fleet(seed: int, args: argparse.Namespace, ratios: list[float], *, own_class: bool) -> list[Judged]:
    """Every peer of one fleet's claim, judged (with `own_class`, each cheater names a CPU of its own)."""
    draws = Draws(seed)
    profiles: list[DeviceProfile] = []
    truths: list[tuple[float, float]] = []  # (true GFLOPS, claimed factor)
    for i in range(args.peers):
        c = i % args.classes
        true = (40.0 + 40.0 * c) * draws.normal(1.0, BOARD_CV)
        factor = 1.5 + 6.5 * draws.uniform() if draws.uniform() < args.cheaters else 1.0
        soc = f"Cortex-X{c} custom {i}" if own_class and factor > 1.0 else ""
        profiles.append(profile_of(i, c, soc=soc, cpu_gflops=true * factor))
        truths.append((true, factor))
    classes = [device_class(p, UNIT) for p in profiles]
    out = []
    for i, (profile, (true, factor)) in enumerate(zip(profiles, truths, strict=True)):
        others = [o for j, o in enumerate(profiles) if j != i and classes[j] == classes[i]]
        problems = tuple(claim_problems(profile, others))
        measured = 0.0 if problems else challenged(true, true * factor, ratios[draws.below(len(ratios))])
        believed = not problems and challenge.passes(measured, true * factor)
        out.append(Judged(factor, problems, measured, believed))
    return out


def challenged(true_gflops: float, claimed_gflops: float, ratio: float) -> float:
    """The challenge's figure for a device of `true_gflops` whose best round runs at `ratio` of its
    calibration, challenged for `claimed_gflops`: the chain sized for the claim, committed after
    the compute and one round trip, less the trip the submitter credits."""
    sizing = challenge.size(claimed_gflops, RTT_S)
    flops = sizing.n * sizing.steps * 2 * 512**2
    elapsed = flops / (true_gflops * ratio * 1e9) + RTT_S
    return challenge.gflops(sizing.n, elapsed, sizing.credit_s, sizing.steps)


def table(args: argparse.Namespace, ratios: list[float]) -> list[dict[str, object]]:
    """Per claimed-factor bin, in the class and as a class of one: claims, believed, and refused by
    the claims check and by the challenge (over `args.seeds` fleets)."""
    rows: list[dict[str, object]] = []
    for own_class in (False, True):
        judged = [
            j
            for k in range(args.seeds)
            for j in judge_fleet(args.seed + k, args, ratios, own_class=own_class)
        ]
        for low, high in BINS:
            got = [j for j in judged if low <= j.factor <= high and (low == high or j.factor > low)]
            if not got:
                continue
            rows.append(
                {
                    "setting": "a class of one" if own_class else "in its class",
                    "factor": f"{low:g}x (honest)" if low == high else f"{low:g}-{high:g}x",
                    "claims": len(got),
                    "believed_pct": 100 * sum(j.believed for j in got) / len(got),
                    "refused_by_claims_pct": 100 * sum(bool(j.problems) for j in got) / len(got),
                    "refused_by_challenge_pct": 100
                    * sum(not j.problems and not j.believed for j in got)
                    / len(got),
                }
            )
    return rows


def main(args: argparse.Namespace) -> None:
    """Print and write the table (`benchmarks/out/replication_sim_claims.json`)."""
    if not args.challenge_noise.exists():
        print(f"no {args.challenge_noise}: run benchmarks/challenge_noise.py first", file=sys.stderr)
        raise SystemExit(2)
    trials = json.loads(args.challenge_noise.read_text())["trials"]
    ratios = [float(t["ratio"]) for t in trials]
    print(
        f"challenge noise: {len(ratios)} trials, best round / calibration "
        f"{min(ratios):.2f}-{max(ratios):.2f} "
        f"(median {statistics.median(ratios):.2f}); a reference device plays no part in a claim's check"
    )
    print(
        f"{'setting':16} {'claimed':>16} {'claims':>7} {'believed':>9} {'refused: claims':>16} "
        f"{'challenge':>10}"
    )
    rows = table(args, ratios)
    for r in rows:
        print(
            f"{r['setting']:16} {r['factor']:>16} {r['claims']:>7} {r['believed_pct']:8.1f}% "
            f"{r['refused_by_claims_pct']:15.1f}% {r['refused_by_challenge_pct']:9.1f}%",
            flush=True,
        )
    out = Path(__file__).resolve().parent / "out" / "replication_sim_claims.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "args": {**vars(args), "challenge_noise": str(args.challenge_noise)},
                "ratios": ratios,
                "rows": rows,
            },
            indent=1,
        )
    )
