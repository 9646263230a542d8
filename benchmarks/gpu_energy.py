"""GPU energy and telemetry against outside references, over the same windows (issue 54; a GPU machine).

Energy: for each window (idle, a bf16 matmul loop at full duty, the same loop at half duty: 50 ms of
work, 50 ms asleep), the node's two NVML sources (`drivers.measuring.energy`: the total-energy
counter read before and after, and the power draw sampled every 100 ms and integrated) beside
zeus's `ZeusMonitor` (the ML.ENERGY project's meter, carried by `benchmarks/gpu_wheels.sh`, never a
dependency of the node), all three opened and closed around the same work, zeus outermost. Printed:
joules from each, and each of ours over zeus's.

Telemetry: over the same windows the node's `Sampler` (100 ms) reads NVML while `nvidia-smi
--query-gpu=power.draw,clocks.sm,temperature.gpu -lms 100` runs beside it as a separate process;
printed: each one's mean power, SM clock and temperature over the window, and ours over nvidia-smi's.

Writes benchmarks/out/gpu_energy.json. Needs torch with CUDA, nvidia-ml-py and nvidia-smi; zeus is
optional (its column says why it is missing).
    python benchmarks/gpu_energy.py [--seconds 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.measuring.counters import NvmlCounter, NvmlPowerSampled  # noqa: E402
from drivers.measuring.telemetry import Sampler  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "gpu_energy.json"
SMI_FIELDS = ("power.draw", "clocks.sm", "temperature.gpu")
WINDOWS = (("idle", 0.0), ("full duty", 1.0), ("half duty", 0.5))
"""In this order: the idle window first, before any work (the board's power falls for seconds after
a load, which the idle window would read as a transient)."""


def workload(torch: Any, seconds: float, duty: float) -> int:
    """bf16 8192 x 8192 products for `seconds`: back to back at duty 1, else `duty` of each 100 ms
    (synchronized, then asleep for the rest); returns the products made."""
    if duty == 0.0:
        time.sleep(seconds)
        return 0
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    made, end = 0, time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        busy_until = now + 0.1 * duty
        while time.perf_counter() < busy_until:
            for _ in range(4):
                torch.mm(a, a)
            torch.cuda.synchronize()
            made += 4
        rest = now + 0.1 - time.perf_counter()
        if rest > 0 and duty < 1.0:
            time.sleep(rest)
    return made


def smi_start() -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def smi_means(proc: subprocess.Popen[str]) -> dict[str, float]:
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            rows.append([float(p) for p in parts])
        except ValueError:
            continue  # "[N/A]" or a partial last line
    if not rows:
        return {}
    means = {name: statistics.fmean(r[i] for r in rows) for i, name in enumerate(SMI_FIELDS)}
    return means | {"n": len(rows)}


def ours_means(points: Any) -> dict[str, float]:
    def mean(field: str) -> float | None:
        values = [getattr(p, field) for p in points if getattr(p, field) is not None]
        return statistics.fmean(values) if values else None

    return {
        "power.draw": mean("gpu_power_w") or 0.0,
        "clocks.sm": mean("gpu_sm_mhz") or 0.0,
        "temperature.gpu": mean("gpu_temp_c") or 0.0,
        "n": len(points),
    }


def zeus_monitor() -> tuple[Any, str]:
    try:
        from zeus.monitor import ZeusMonitor

        return ZeusMonitor(gpu_indices=[0]), ""
    except Exception as exc:  # not carried, or it refused this machine: say which
        return None, f"{type(exc).__name__}: {exc}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    import pynvml
    import torch

    if not torch.cuda.is_available():
        print(f"no CUDA device (torch {torch.__version__}): nothing to compare")
        return 1
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(handle)
    zeus, zeus_missing = zeus_monitor()
    if zeus_missing:
        print(f"zeus: {zeus_missing}")
    windows = []
    for label, duty in WINDOWS:
        if duty and not windows[-1]["products"]:
            workload(torch, 1.0, 1.0)  # kernels loaded, clocks up (after the idle window: it stays idle)
        counter, sampled = NvmlCounter(pynvml, handle), NvmlPowerSampled(pynvml, handle)
        smi = smi_start()
        time.sleep(0.3)  # nvidia-smi's first line is out before the window opens
        with Sampler(period_s=0.1) as sampler:
            if zeus is not None:
                zeus.begin_window(label)
            counter.start()
            sampled.start()
            made = workload(torch, args.seconds, duty)
            counter_j, counter_s = counter.stop()
            sampled_j, sampled_s = sampled.stop()
            zeus_j = zeus.end_window(label).gpu_energy[0] if zeus is not None else None
        telemetry = sampler.telemetry()
        theirs = smi_means(smi)
        ours = ours_means(telemetry.points)
        row = {
            "window": label,
            "duty": duty,
            "products": made,
            "counter_j": counter_j,
            "counter_s": counter_s,
            "sampled_j": sampled_j,
            "sampled_s": sampled_s,
            "zeus_j": zeus_j,
            "sampled_over_counter": sampled_j / counter_j if counter_j else None,
            "counter_over_zeus": counter_j / zeus_j if zeus_j else None,
            "sampled_over_zeus": sampled_j / zeus_j if zeus_j else None,
            "ours": ours,
            "nvidia_smi": theirs,
            "ours_over_smi": {k: ours[k] / theirs[k] for k in SMI_FIELDS if theirs.get(k)},
        }
        windows.append(row)
        zeus_text = f"zeus {zeus_j:.1f} J" if zeus_j is not None else "zeus -"
        print(
            f"{label:<9} counter {counter_j:.1f} J, sampled {sampled_j:.1f} J, {zeus_text}; "
            f"sampled/counter {row['sampled_over_counter'] or float('nan'):.3f}, "
            f"counter/zeus {row['counter_over_zeus'] or float('nan'):.3f}",
            flush=True,
        )
        print(
            "          telemetry ours/nvidia-smi: "
            + ", ".join(f"{k} {v:.3f}" for k, v in row["ours_over_smi"].items())
            + f" (ours {ours['power.draw']:.0f} W {ours['clocks.sm']:.0f} MHz {ours['temperature.gpu']:.0f} C"
            f" n={ours['n']}; smi {theirs.get('power.draw', 0):.0f} W {theirs.get('clocks.sm', 0):.0f} MHz "
            f"{theirs.get('temperature.gpu', 0):.0f} C n={theirs.get('n', 0)})",
            flush=True,
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    found = {"gpu": name, "zeus": zeus_missing or "zeus 0.16", "windows": windows}
    OUT.write_text(json.dumps(found, indent=1))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
