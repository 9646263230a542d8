"""Device calibration: CPU matrix throughput and memory bandwidth, a few seconds, cached per device.

The cache key is the device fingerprint plus numpy's and onnxruntime's versions, so an upgrade
recalibrates. Figures are the best of several short repeats (least disturbed by other tenants).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Final

import numpy as np
from pydantic import ValidationError

from protocol import Calibration

MATMUL_N: Final = 512
COPY_MB: Final = 64
REPEAT_S: Final = 0.6  # time spent on each kernel


def calibration_key(fingerprint: str, versions: dict[str, str]) -> str:
    """The cache key: 16 hex of sha256 over the fingerprint and numpy / onnxruntime versions."""
    text = "|".join([fingerprint, versions.get("numpy", ""), versions.get("onnxruntime", "")])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cpu_gflops(n: int = MATMUL_N, seconds: float = REPEAT_S) -> float:
    """float32 matrix-multiply throughput, best single product over `seconds`."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    return 2.0 * n**3 / _best(lambda: np.matmul(a, b, out=out), seconds) / 1e9


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


def calibrate(cache_dir: Path | None, key: str) -> Calibration:
    """The device's calibration: read from `cache_dir` when cached under `key`, else measured and cached."""
    path = cache_dir / f"calibration-{key}.json" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            return Calibration.model_validate_json(path.read_text())
        except ValidationError:
            path.unlink()
    start = time.perf_counter()
    result = Calibration(
        cpu_gflops=cpu_gflops(),
        mem_bandwidth_gbs=mem_bandwidth_gbs(),
        seconds=time.perf_counter() - start,
        key=key,
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result.model_dump()))
        tmp.replace(path)
    return result
