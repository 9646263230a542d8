"""Each CPU peak of `sark-node info --bench` against a bare loop of the same kernel, side by side.

For every CPU figure (fp32, bf16, int8, fp16 where the CPU has it; memory read, write, copy), each
round runs the peak's own machinery (`drivers.measuring.peakchild.swept`, the function `info --bench`'s
child calls: warm-up rule, repeats, size sweep to the plateau, thread choice) and, right after it, a
bare loop of the same call at the size and thread count the figure came from: the call built by the
kernel (`Kernel.make`), called once, then timed back to back for `--bare-s` seconds, fastest call kept,
nothing else. The ratio is peak / bare; the acceptance is within 15 % (0.85-1.15). Each figure's
median ratio over `--rounds` rounds is printed with the load average; unavailable figures are listed
with their reason. Writes benchmarks/out/peaks.json.

Usage: .venv/bin/python benchmarks/peaks.py [--rounds 3] [--bare-s 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.measuring.peakchild import swept  # noqa: E402
from drivers.measuring.peakkernels import Kernel, cpu_kernels  # noqa: E402
from protocol import Peak  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "peaks.json"
BAND = 0.15


def bare(kernel: Kernel, size: int, threads: int | None, seconds: float) -> float:
    """The kernel's rate at `size` and `threads` in a bare loop: one call, then the fastest of
    back-to-back calls for `seconds` (work per second, G units)."""
    call = kernel.make(size, threads)
    with kernel.limit(threads):
        call()
        best = float("inf")
        end = time.perf_counter() + seconds
        while True:
            start = time.perf_counter()
            call()
            now = time.perf_counter()
            best = min(best, now - start)
            if now > end:
                break
    return kernel.work(size) / max(best, 1e-9) / 1e9


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-s", type=float, default=1.0)
    args = parser.parse_args()
    kernels = cpu_kernels()
    rows: dict[str, list[dict[str, object]]] = {}
    for r in range(args.rounds):
        for kernel in kernels:
            if isinstance(kernel, Peak):
                rows.setdefault(kernel.precision, []).append({"unavailable": kernel.reason})
                continue
            peak, timed = swept(kernel)
            rate = bare(kernel, timed.size, timed.threads, args.bare_s)
            row = {
                "peak": peak.per_s,
                "bare": rate,
                "ratio": peak.per_s / rate,
                "sizes": peak.sizes,
                "load": os.getloadavg()[0],
                "library": peak.library,
                "kernel": peak.kernel,
            }
            rows.setdefault(kernel.precision, []).append(row)
            print(
                f"round {r} {kernel.precision}: peak {peak.per_s:.1f} {peak.figure}, bare {rate:.1f}, "
                f"ratio {peak.per_s / rate:.3f} ({peak.sizes}; load {row['load']:.1f})",
                flush=True,
            )
    summary = {}
    for precision, taken in rows.items():
        ratios = [float(str(t["ratio"])) for t in taken if "ratio" in t]
        if not ratios:
            summary[precision] = {"unavailable": taken[0]["unavailable"]}
            print(f"{precision}: unavailable ({taken[0]['unavailable']})")
            continue
        middle = statistics.median(ratios)
        within = abs(middle - 1.0) <= BAND
        summary[precision] = {
            "median_ratio": middle,
            "within": within,
            "median_peak": statistics.median(float(str(t["peak"])) for t in taken),
        }
        print(
            f"{precision}: median ratio {middle:.3f} over {len(ratios)} rounds "
            f"({'within' if within else 'OUTSIDE'} {BAND:.0%}), peak {summary[precision]['median_peak']:.1f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"band": BAND, "summary": summary, "rounds": rows}, indent=1))


if __name__ == "__main__":
    main()
