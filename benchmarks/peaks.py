"""Each CPU peak of `sark-node info --bench` against a bare loop of the same kernel, side by side.

For every CPU figure (fp32, bf16, int8, fp16 where the CPU has it; memory read, write, copy), each
round runs the peak's own machinery (`drivers.measuring.peakchild.swept`, the function `info --bench`'s
child calls: warm-up rule, repeats, size sweep to the plateau, thread choice) and, right after it, a
bare loop of the same call at the size and thread count the figure came from: the call built by the
kernel (`Kernel.make`), called once, then timed back to back for `--bare-s` seconds, fastest call kept,
nothing else. The ratio is peak / bare; the acceptance is within 15 % (0.85-1.15). Each figure's
median ratio over `--rounds` rounds is printed with the load average; unavailable figures are listed
with their reason. Writes benchmarks/out/peaks.json.

`--gpu` does the same for each CUDA device's figures (`drivers.measuring.gpupeaks`, issue 54), against a
bare torch loop written here apart from the kernel (`bare_gpu`: the same op, precision and size, timed
by CUDA events over back-to-back calls after a warm-up); writes benchmarks/out/peaks_gpu.json.

Usage: .venv/bin/python benchmarks/peaks.py [--rounds 3] [--bare-s 1.0] [--gpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.measuring.gpupeaks import gpu_kernels  # noqa: E402
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


def bare_gpu(kernel: Kernel, size: int, seconds: float) -> float:
    """The same figure from a bare torch loop on the kernel's device: `torch.mm` (`_int_mm` for int8,
    `_scaled_mm` for fp8) on n x n, or `sum` / `fill_` / `copy_` over `size` bytes of float32, each
    call timed by a pair of CUDA events; the fastest call of `seconds` of calls after 3 warm-ups
    (G units a second, as the figure)."""
    import torch

    device = torch.device(kernel.unit.split()[0])
    op: Callable[[], object]
    if kernel.memory:
        x = torch.ones(size // 4, device=device)
        y = torch.empty_like(x)
        op = {"read": x.sum, "write": lambda: x.fill_(1.0), "copy": lambda: y.copy_(x)}[kernel.precision]
        work = float(size * (2 if kernel.precision == "copy" else 1))
    else:
        torch.backends.cuda.matmul.allow_tf32 = kernel.precision == "tf32"
        base = torch.randn(size, size, device=device)
        if kernel.precision == "int8":
            a8 = base.to(torch.int8)
            op = lambda: torch._int_mm(a8, a8)  # noqa: E731
        elif kernel.precision == "fp8":
            f8, one = base.to(torch.float8_e4m3fn), torch.ones((), device=device)
            op = lambda: torch._scaled_mm(f8, f8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(kernel.precision, torch.float32)
            a = base.to(dtype)
            op = lambda: torch.mm(a, a)  # noqa: E731
        work = 2.0 * size**3
    for _ in range(3):
        op()
    torch.cuda.synchronize(device)
    best, end = float("inf"), time.perf_counter() + seconds
    begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while time.perf_counter() < end:
        begin.record()
        op()
        finish.record()
        finish.synchronize()
        best = min(best, begin.elapsed_time(finish) / 1e3)
    return work / best / 1e9


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-s", type=float, default=1.0)
    parser.add_argument("--gpu", action="store_true", help="each CUDA device's figures instead")
    args = parser.parse_args()
    kernels = gpu_kernels() if args.gpu else cpu_kernels()
    out = OUT.with_name("peaks_gpu.json") if args.gpu else OUT
    rows: dict[str, list[dict[str, object]]] = {}
    for r in range(args.rounds):
        for kernel in kernels:
            if isinstance(kernel, Peak):
                rows.setdefault(_key(kernel), []).append({"unavailable": kernel.reason})
                continue
            peak, timed = swept(kernel)
            if args.gpu:
                rate = bare_gpu(kernel, timed.size, args.bare_s)
            else:
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
            rows.setdefault(_key(kernel), []).append(row)
            print(
                f"round {r} {_key(kernel)}: peak {peak.per_s:.1f} {peak.figure}, bare {rate:.1f}, "
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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"band": BAND, "summary": summary, "rounds": rows}, indent=1))


def _key(kernel: Kernel | Peak) -> str:
    """A figure's name in the output: the precision on the CPU, the device and precision on a GPU."""
    return kernel.precision if kernel.unit == "CPU" else f"{kernel.unit} {kernel.precision}"


if __name__ == "__main__":
    main()
