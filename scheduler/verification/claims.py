"""A peer's advertised device against what its class and physics allow: `claim_unverified` and why.

At discovery a peer's profile is the peer's word. Its calibration (a matmul's GFLOPS, a copy's GB/s,
each GPU's TFLOPS) is a measurement it took of itself, so it is checked two ways:

- physics: a CPU core does at most `MAX_GFLOPS_PER_CORE` fp32 GFLOPS (two 512-bit FMA units at
  4 GHz give 256 peak; the calibration's matmul reaches 70-90 % of peak), memory copies at most
  `MAX_COPY_GBS`, a GPU at most `MAX_GPU_TFLOPS` (an H200's dense fp8 peak is about 2,000); a GPU
  figure or a usable GPU unit on a profile that lists no GPU is a claim with nothing behind it;
- its class: with at least `PEERS_FOR_CLASS` other peers of its class, a calibration more than
  `CLASS_FACTOR` times the class median (faster) is a claim its class does not measure.

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
    return problems


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
