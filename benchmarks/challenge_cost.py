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
Prints a table and writes benchmarks/out/challenge_cost.json.
Run: .venv/bin/python benchmarks/challenge_cost.py [--workers 10] [--rounds 3] [--load 0 8]
"""

from __future__ import annotations

import argparse
import json
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


def _timed(argv: list[str]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:5])} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - start, json.loads(done.stdout)


def measure(workers: int, rounds: int, load: int) -> dict[str, Any]:
    """`rounds` pairs of (`peers`, `peers --challenge`) on a fresh swarm of `workers`, load beside."""
    from kit.load import Load

    root = Path(tempfile.mkdtemp(prefix="sark-challenge-cost-"))
    lab = Lab(root, record_ttl=60.0)
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
                "--timeout", "10"]  # fmt: skip
        plain: list[float] = []
        challenged: list[float] = []
        verdicts: list[str] = []
        found: list[int] = []
        with Load(load):
            for _ in range(rounds):
                plain.append(_timed(base)[0])
                took, listed = _timed([*base, "--challenge"])
                challenged.append(took)
                found.append(len(listed["peers"]))
                verdicts += [c["verdict"] for p in listed["peers"] for c in p.get("challenge", ())]
    finally:
        lab.close()
    cost = statistics.median(challenged) - statistics.median(plain)
    return {"workers": workers, "load": load, "claim_gflops": round(claim, 1), "peers_s": plain,
            "challenge_s": challenged, "cost_s": cost, "per_worker_s": cost / workers,
            "found": found, "borne_out": verdicts.count("borne out"),
            "verdicts": len(verdicts)}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 8], help="spinning processes beside")
    args = parser.parse_args()
    runs = [measure(args.workers, args.rounds, load) for load in args.load]
    print("| load | workers | peers s (median) | peers --challenge s (median) | cost s | per worker s "
          "| borne out |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r['load']} | {r['workers']} | {statistics.median(r['peers_s']):.2f} | "
            f"{statistics.median(r['challenge_s']):.2f} | **{r['cost_s']:.2f}** | {r['per_worker_s']:.2f} | "
            f"{r['borne_out']}/{r['verdicts']} |"
        )
    OUT.mkdir(exist_ok=True)
    (OUT / "challenge_cost.json").write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
