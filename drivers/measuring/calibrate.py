"""Device calibration: CPU matrix throughput and memory bandwidth, a few seconds, cached per device.

The cache key is the device fingerprint plus numpy's and onnxruntime's versions and the method, so
an upgrade recalibrates. The CPU figure is the faster of every BLAS thread and one (`cpu_gflops`).
Figures are the best of several short repeats (least disturbed by other tenants), and they are taken
on a quiet machine only: before measuring, the background load is sampled; a figure measured while
other processes kept more than `QUIET_CORES` busy is kept, marked `quiet=False` with the load it ran
under, and taken again at the next chance on a quiet machine.

A GPU's figure (`Calibration.gpu_tflops`) is not taken here: the probe measures it on the GPU
challenge's own kernel when `GPU (PyTorch)` is usable (`drivers.probe.profile.gpu_tflops`).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Final

import numpy as np
from pydantic import ValidationError

from drivers.measuring.meters import CpuMeter
from drivers.measuring.peakkernels import blas_limit
from protocol import Calibration

MATMUL_N: Final = 512
COPY_MB: Final = 64
REPEAT_S: Final = 0.6  # time spent on each kernel
QUIET_CORES: Final = 0.25  # background load (cores busy in other processes) up to which a machine is quiet
SAMPLE_S: Final = 0.3  # how long the background load is sampled before measuring


METHOD: Final = "cpu: faster of 1 and all BLAS threads"
"""How the figures are taken; part of the cache key, so a figure taken another way is taken again."""
THREADS: Final = (None, 1)
"""The BLAS thread limits the CPU figure is taken at (None: BLAS's own, every core)."""


def calibration_key(fingerprint: str, versions: dict[str, str]) -> str:
    """The cache key: 16 hex of sha256 over the fingerprint, numpy / onnxruntime versions and `METHOD`."""
    text = "|".join([fingerprint, versions.get("numpy", ""), versions.get("onnxruntime", ""), METHOD])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cpu_gflops(n: int = MATMUL_N, seconds: float = REPEAT_S) -> float:
    """float32 matrix-multiply throughput: the best single product over `seconds` on every BLAS thread
    and over `seconds` on one, the faster of the two, as the CPU challenge's kernel times its chain
    (`challengechild`): a claim is checked against what it was measured as. Beside other work,
    OpenBLAS on every thread crawls (on 2 cores at load 8: 1.0 GFLOPS on both threads against 92 on
    one), so a worker that joined on a busy machine advertised about 1 % of what its device can do."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    limit = blas_limit()
    figures = []
    for threads in THREADS:
        with limit(threads):
            figures.append(2.0 * n**3 / _best(lambda: np.matmul(a, b, out=out), seconds) / 1e9)
    return max(figures)


def mem_bandwidth_gbs(mb: int = COPY_MB, seconds: float = REPEAT_S) -> float:
    """Copy bandwidth (bytes read + written per second), best single copy of `mb` MiB over `seconds`."""
    src = np.ones(mb * (1 << 20) // 8, dtype=np.float64)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / _best(lambda: np.copyto(dst, src), seconds) / 1e9


def _best(kernel: object, seconds: float) -> float:
    assert callable(kernel)
    kernel()  # warm-up: page faults, thread start
    best = float("inf")
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        kernel()
        t1 = time.perf_counter()
        best = min(best, t1 - t0)
        if t1 > end:
            return max(best, 1e-9)


def background_cores(seconds: float = SAMPLE_S) -> float:
    """Cores that other processes keep busy, sampled over `seconds` while this process sleeps."""
    with CpuMeter() as meter:
        time.sleep(seconds)
    return meter.background_cores


def measure(key: str, quiet_cores: float = QUIET_CORES) -> Calibration:
    """Calibrate now, recording the background load before and during the kernels (the larger one)."""
    before = background_cores()
    start = time.perf_counter()
    with CpuMeter() as meter:
        gflops, bandwidth = cpu_gflops(), mem_bandwidth_gbs()
    load = max(before, meter.background_cores)
    return Calibration(
        cpu_gflops=gflops,
        mem_bandwidth_gbs=bandwidth,
        seconds=time.perf_counter() - start,
        key=key,
        taken_at=time.time(),
        background_cores=round(load, 2),
        quiet=load <= quiet_cores,
    )


def calibrate(
    cache_dir: Path | None, key: str, *, force: bool = False, quiet_cores: float = QUIET_CORES
) -> Calibration:
    """The device's calibration, measured only when it has to be.

    A quiet cached figure is reused unless `force`. A figure taken under load (or of unknown load) is
    taken again when the machine is quiet now, and otherwise returned as it is, still marked.
    `quiet_cores` is the background load up to which the machine counts as quiet.
    """
    path = cache_dir / f"calibration-{key}.json" if cache_dir is not None else None
    cached = _read(path)
    if cached is not None and not force and (cached.quiet or background_cores() > quiet_cores):
        return cached
    result = measure(key, quiet_cores)
    if cached is not None and not result.quiet and cached.taken_at and not force:
        return cached  # still loaded: a new loaded figure is no better than the old one
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result.model_dump()))
        tmp.replace(path)
    return result


def _read(path: Path | None) -> Calibration | None:
    if path is None or not path.is_file():
        return None
    try:
        return Calibration.model_validate_json(path.read_text())
    except ValidationError:
        path.unlink()
        return None


__all__ = ["QUIET_CORES", "background_cores", "calibrate", "calibration_key", "measure"]
