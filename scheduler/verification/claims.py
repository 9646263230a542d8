"""A peer's advertised device against what its class and physics allow: `claim_unverified` and why.

At discovery a peer's profile is the peer's word. Its calibration (a matmul's GFLOPS, a copy's GB/s,
each GPU's TFLOPS) is a measurement it took of itself, so it is checked two ways:

- physics: a CPU core does at most `MAX_GFLOPS_PER_CORE` fp32 GFLOPS (two 512-bit FMA units at
  4 GHz give 256 peak; the calibration's matmul reaches 70-90 % of peak), memory copies at most
  `MAX_COPY_GBS`, a GPU at most `MAX_GPU_TFLOPS` (an H200's dense fp8 peak is about 2,000); a GPU
  figure or a usable GPU unit on a profile that lists no GPU is a claim with nothing behind it;
- its class: with at least `PEERS_FOR_CLASS` other peers of its class, a calibration more than
  `CLASS_FACTOR` times the class median (faster) is a claim its class does not measure;
- its peaks (`peak_problems`): each against the calibration taken beside it, the fp32 figure, and
  its class's median of that figure.

A peer marked `claim_unverified` is placed only when the campaign allows it (`verify: {unverified:
allow}`), and every view shows the mark with the reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final

from protocol import ComputeUnit, DeviceProfile

MAX_GFLOPS_PER_CORE: Final = 300.0
MAX_COPY_GBS: Final = 2000.0
MAX_GPU_TFLOPS: Final = 2500.0
CLASS_FACTOR: Final = 1.5
"""How much faster than its class's median calibration a peer may claim to be (noise and binning
spread honest boards of one model by tens of percent, not by half)."""
PEERS_FOR_CLASS: Final = 2
PEAK_FACTOR: Final = 2.0
"""How far a CPU peak may stand above the calibration of its kind taken beside it (a sweep's plateau
and thread choice against one 512 product on all threads, a DRAM copy against a 64 MiB one: honest
figures of one minute differ by tens of percent, not by twice)."""
PRECISION_RATIO: Final = {"bf16": 16.0, "fp16": 16.0, "int8": 32.0}
"""The most a narrower precision's matmul may do over fp32 on one CPU (AMX: 16x bf16, 32x int8 over
AVX-512 fp32 FMAs per cycle)."""
_GPU_UNITS: Final = frozenset({ComputeUnit.GPU_ONNX, ComputeUnit.GPU_TORCH})


def claim_problems(profile: DeviceProfile, class_peers: Sequence[DeviceProfile] = ()) -> list[str]:
    """Why the profile's claims are not believed (empty: verified as far as we can tell).

    Args:
        profile: the peer's advertised profile.
        class_peers: the other peers of its device class the submitter knows (their profiles).
    """
    problems = [p for p in _physics(profile) if p]
    if not profile.gpus:
        usable_gpu = [u.value for u in profile.usable_units() if u in _GPU_UNITS]
        if usable_gpu:
            problems.append(f"{', '.join(usable_gpu)} usable with no GPU listed")
    problems.extend(_against_class(profile, class_peers))
    problems.extend(peak_problems(profile, class_peers))
    return problems


def peak_problems(profile: DeviceProfile, class_peers: Sequence[DeviceProfile] = ()) -> list[str]:
    """Why the profile's peaks (`Calibration.peaks`, `sark-node info --bench`) are not believed.

    The cheater writes every figure of its advert. What it cannot choose: the CPU fp32 figure is
    challenged (`Calibration.cpu_claim`, the larger of it and the calibration), and here each peak
    is held to the calibration the same child run re-took beside it (`info --bench` recalibrates):
    fp32 to `PEAK_FACTOR` x `cpu_gflops`, memory (read, write, copy: bytes moved per second, all
    through the same DRAM) to `PEAK_FACTOR` x the calibration's copy, each narrower
    precision to `PRECISION_RATIO` x the fp32 figure (what AMX's widest tiles do over AVX-512
    fp32), and each to `CLASS_FACTOR` x its class's median of that figure. A figure inflated within
    those bounds is not caught here (no challenge of its own yet): its class is what refutes it.
    """
    cal = profile.calibration
    if cal is None:
        return []
    found: list[str] = []
    for peak in cal.peaks:
        if not peak.available:
            continue
        name = f"peaks[{peak.unit} {peak.precision}] {peak.per_s:.4g} {peak.figure}"
        bound, of = _peak_bound(profile, peak.unit, peak.precision)
        if bound is not None and peak.per_s > bound:
            found.append(f"{name} over {bound:.4g} ({of})")
        found.extend(_peak_class(name, peak.unit, peak.precision, peak.per_s, class_peers))
    return found


def _peak_bound(profile: DeviceProfile, unit: str, precision: str) -> tuple[float | None, str]:
    """The most a peak may be, and what that bound is made of."""
    cal = profile.calibration
    assert cal is not None
    if unit != "CPU":
        gpu = not profile.gpus
        return (0.0, "no GPU listed") if gpu else (MAX_GPU_TFLOPS * 1e3, f"{MAX_GPU_TFLOPS:g} TFLOPS")
    if precision == "fp32":
        return PEAK_FACTOR * cal.cpu_gflops, f"{PEAK_FACTOR:g}x calibration.cpu_gflops {cal.cpu_gflops:.4g}"
    if precision in ("read", "write", "copy"):
        bound = PEAK_FACTOR * cal.mem_bandwidth_gbs
        return bound, f"{PEAK_FACTOR:g}x calibration.mem_bandwidth_gbs {cal.mem_bandwidth_gbs:.4g}"
    ratio = PRECISION_RATIO.get(precision)
    if ratio is None:
        return None, ""
    fp32 = cal.peak("CPU", "fp32")  # left out of the advert: the challenged calibration stands for it
    base = PEAK_FACTOR * cal.cpu_gflops if fp32 is None else min(fp32.per_s, PEAK_FACTOR * cal.cpu_gflops)
    return ratio * base, f"{ratio:g}x the fp32 peak"


def _peak_class(
    name: str, unit: str, precision: str, value: float, class_peers: Sequence[DeviceProfile]
) -> list[str]:
    others = [p.calibration.peak(unit, precision) for p in class_peers if p.calibration is not None]
    figures = [o.per_s for o in others if o is not None]
    if len(figures) < PEERS_FOR_CLASS:
        return []
    middle = statistics.median(figures)
    if middle > 0 and value > CLASS_FACTOR * middle:
        ratio = value / middle
        return [f"{name} is {ratio:.2f}x its class's median {middle:.4g} (at most {CLASS_FACTOR:g}x)"]
    return []


def _physics(profile: DeviceProfile) -> list[str]:
    cal = profile.calibration
    if cal is None:
        return []
    cores = max(profile.cores_logical, 1)
    found: list[str] = []
    if cal.cpu_gflops > cores * MAX_GFLOPS_PER_CORE:
        found.append(
            f"calibration.cpu_gflops {cal.cpu_gflops:.4g} over {cores} cores x {MAX_GFLOPS_PER_CORE:g} GFLOPS"
        )
    if cal.mem_bandwidth_gbs > MAX_COPY_GBS:
        found.append(f"calibration.mem_bandwidth_gbs {cal.mem_bandwidth_gbs:.4g} over {MAX_COPY_GBS:g} GB/s")
    for name, tflops in cal.gpu_tflops.items():
        if not profile.gpus:
            found.append(f"calibration.gpu_tflops[{name}] {tflops:.4g} with no GPU listed")
        elif tflops > MAX_GPU_TFLOPS:
            found.append(f"calibration.gpu_tflops[{name}] {tflops:.4g} over {MAX_GPU_TFLOPS:g} TFLOPS")
    return found


def _against_class(profile: DeviceProfile, class_peers: Sequence[DeviceProfile]) -> list[str]:
    cal = profile.calibration
    others = [p.calibration.cpu_gflops for p in class_peers if p.calibration is not None]
    if cal is None or len(others) < PEERS_FOR_CLASS:
        return []
    middle = statistics.median(others)
    if middle > 0 and cal.cpu_gflops > CLASS_FACTOR * middle:
        ratio = cal.cpu_gflops / middle
        return [
            f"calibration.cpu_gflops {cal.cpu_gflops:.4g} is {ratio:.2f}x its class's median "
            f"{middle:.4g} over {len(others)} peers (at most {CLASS_FACTOR:g}x)"
        ]
    return []
