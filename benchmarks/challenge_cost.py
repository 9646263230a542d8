"""What the CPU challenge costs a campaign's start: `peers --challenge` against `peers`, same swarm.

A gate and N real `sark-node join` workers on this machine, each advertising a written profile
(`join --profile`: no device probe) whose CPU claim is what this machine's challenge kernel does on
one BLAS thread, measured here first (the best of three chains of the CPU challenge's own size):
honest claims, so every challenge is borne out and each is the cost of a passing peer. Then, with
one submitter identity every worker allows, in turns: `peers --json` (discovery and the profile
probes) and `peers --challenge --json` (the same, then every peer's challenge: a spawned child,
pings, up to three rounds, the reveal), each timed whole from exec to exit. The challenge's cost
is the difference of their medians: what a `verify:` campaign's start pays over one that asks
nothing. Peers on one host are challenged one after another (their chains would share its cores),
so N workers on one machine are N challenges in a row: a fleet of N devices pays about one of them.

With `--load L` the same runs again with L processes spinning beside them (tests/kit/load.py).
With `--baseline DIR` (a checkout of an earlier commit: `git worktree add DIR <commit>`), each load
is measured first with that code (every process started with DIR first on PYTHONPATH) and then with
this checkout's, on the same machine in the same run: the table's `code` column says which.
Prints a table and writes benchmarks/out/challenge_cost.json.
Run: .venv/bin/python benchmarks/challenge_cost.py [--workers 10] [--rounds 3] [--load 0 8]
[--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from swarmlab import LOOPBACK, OUT, ROOT, SARK, Lab, submitter_id

sys.path.append(str(ROOT / "tests"))


def _kernel_gflops() -> float:
    """This machine's challenge kernel on one BLAS thread, the best of three chains (n = 512, 16 steps)."""
    from threadpoolctl import threadpool_limits

    from drivers.measuring.challengechild import chain, digests, expand
    from protocol import CPU_CHAIN_N
    from scheduler.verification import challenge

    best = 0.0
    with threadpool_limits(1, user_api="blas"):
        for seed in range(3):
            start = time.perf_counter()
            digests(chain(*expand(seed, CPU_CHAIN_N), 16))
            best = max(best, challenge.gflops(CPU_CHAIN_N, time.perf_counter() - start, 0.0, 16))
    return best


def _profile(root: Path, gflops: float) -> Path:
    from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus

    profile = DeviceProfile(
        device_name="bench", soc="bench-cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="b" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=gflops, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    path = root / "profile.json"
    path.write_text(profile.model_dump_json())
    return path


LOOKUP_TRIES = 3
"""A run whose lookup found no worker (the gate answered none: a discovery flake on a busy machine, not
the challenge's cost) is run again, up to this many times; the count is reported."""


def _timed(argv: list[str], missed: list[str]) -> tuple[float, dict[str, Any]]:
    """One run timed from exec to exit; a lookup that found no worker is run again (`missed` says so)."""
    for _ in range(LOOKUP_TRIES):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        took = time.perf_counter() - start
        if done.returncode == 0:
            print(f"  peers{' --challenge' * (argv[-1] == '--challenge')}: {took:.2f} s", file=sys.stderr)
            return took, json.loads(done.stdout)
        if "no worker found" not in done.stderr:
            break
        missed.append(done.stderr.strip().splitlines()[-1][:200])
    raise SystemExit(f"peers exited {done.returncode}: {done.stderr[-2000:]}")


def _all_listed(base: list[str], workers: int, most_s: float = 120.0) -> None:
    """Wait until `peers` lists every worker (a worker says `ready` before the gate holds its provider
    record: a lookup just after found none, and the timed runs would have measured that)."""
    deadline = time.monotonic() + most_s
    while True:
        done = subprocess.run(base, capture_output=True, text=True, timeout=600)
        found = len(json.loads(done.stdout)["peers"]) if done.returncode == 0 else 0
        if found >= workers:
            return
        if time.monotonic() > deadline:
            why = done.stderr[-2000:]
            raise SystemExit(f"peers lists {found} of {workers} workers after {most_s:g} s: {why}")
        time.sleep(1.0)


def measure(workers: int, rounds: int, load: int, code: Path = ROOT) -> dict[str, Any]:
    """`rounds` pairs of (`peers`, `peers --challenge`) on a fresh swarm of `workers`, load beside,
    every process running `code`'s packages."""
    from kit.load import Load

    os.environ["PYTHONPATH"] = str(code)

    root = Path(tempfile.mkdtemp(prefix="sark-challenge-cost-"))
    lab = Lab(root)
    claim = _kernel_gflops()
    try:
        me = submitter_id(root / "submitter")
        gate = lab.gate().ready["addrs"][0]
        profile = _profile(root, claim)
        procs = [
            lab.start(f"w{i}", [*SARK, "join", "--listen", LOOPBACK, "--data-dir", str(root / f"w{i}"),
                                "--allow", me, "--gate", gate, "--profile", str(profile), "--events"])
            for i in range(workers)
        ]  # fmt: skip
        for proc in procs:
            proc.wait_event("ready", 300)
        base = [*SARK, "peers", "--json", "--gate", gate, "--data-dir", str(root / "submitter"),
                "--timeout", "30"]  # fmt: skip
        _all_listed(base, workers)
        plain: list[float] = []
        challenged: list[float] = []
        verdicts: list[str] = []
        found: list[int] = []
        missed: list[str] = []
        with Load(load):
            for _ in range(rounds):
                plain.append(_timed(base, missed)[0])
                took, listed = _timed([*base, "--challenge"], missed)
                challenged.append(took)
                found.append(len(listed["peers"]))
                verdicts += [c["verdict"] for p in listed["peers"] for c in p.get("challenge", ())]
    finally:
        lab.close()
    cost = statistics.median(challenged) - statistics.median(plain)
    return {"code": "this" if code == ROOT else "baseline", "workers": workers, "load": load,
            "claim_gflops": round(claim, 1), "peers_s": plain,
            "challenge_s": challenged, "cost_s": cost, "per_worker_s": cost / workers,
            "found": found, "borne_out": verdicts.count("borne out"),
            "verdicts": len(verdicts), "lookups_missed": missed}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 8], help="spinning processes beside")
    parser.add_argument("--baseline", type=Path, help="an earlier checkout measured beside this one")
    args = parser.parse_args()
    codes = [args.baseline.resolve(), ROOT] if args.baseline else [ROOT]
    runs = []
    OUT.mkdir(exist_ok=True)
    for load in args.load:
        for code in codes:
            runs.append(measure(args.workers, args.rounds, load, code))
            (OUT / "challenge_cost.json").write_text(json.dumps(runs, indent=1))  # kept if a later run fails
    print("| code | load | workers | peers s (median) | peers --challenge s (median) | cost s | per worker s "
          "| borne out |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r['code']} | {r['load']} | {r['workers']} | {statistics.median(r['peers_s']):.2f} | "
            f"{statistics.median(r['challenge_s']):.2f} | **{r['cost_s']:.2f}** | {r['per_worker_s']:.2f} | "
            f"{r['borne_out']}/{r['verdicts']} |"
        )


if __name__ == "__main__":
    main()
