"""The device profile: facts about this device and a truthful probe of every compute unit."""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path

import psutil

from drivers.measuring import calibrate as calibration
from drivers.measuring import device, peaks
from drivers.runtimes.registry import REGISTRY
from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus, visible


def probe_units() -> tuple[UnitStatus, ...]:
    """Every compute unit, probed by its driver; a probe that raises is an unusable unit with the error."""
    statuses = []
    for unit in ComputeUnit:
        try:
            statuses.append(REGISTRY[unit].probe())
        except Exception as exc:  # a broken runtime must not stop the others from being probed
            statuses.append(
                UnitStatus(unit=unit, usable=False, reason=f"probe failed: {type(exc).__name__}: {exc}")
            )
    return tuple(statuses)


def gpu_tflops() -> dict[str, float]:
    """Each CUDA device's TFLOPS on the GPU challenge's own kernel
    (`drivers.measuring.chainchild.throughput`),
    by torch device name: measured only when `GPU (PyTorch)` ran its probe (about a second each)."""
    import torch

    from drivers.measuring.chainchild import throughput

    return {f"cuda:{i}": throughput(f"cuda:{i}") / 1e3 for i in range(min(torch.cuda.device_count(), 16))}


def probe_generation() -> tuple[UnitStatus, ...]:
    """The units that generate here: the transformers units, each probed by generating 2 tokens from a
    tiny in-memory Llama, and the llama.cpp units, each by loading the packaged GGUF on its build and
    decoding a token; the others with the reason (runtime missing, no device, the probe's error)."""
    from drivers.runtimes import (
        llamacpp,  # transformers and torch are imported by the probe itself, if at all
        llm,
    )

    torch_units = tuple(llm.probe(unit) for unit in llm.GENERATIVE_UNITS)
    return torch_units + tuple(REGISTRY[unit].probe() for unit in llamacpp.UNITS)


def detect_profile(
    cache_dir: Path | None = None,
    *,
    calibrate: bool = True,
    recalibrate: bool = False,
    on_stage: Callable[[str], None] | None = None,
) -> DeviceProfile:
    """This device's profile with every compute unit probed (usable or not, with the reason).

    Args:
        cache_dir: where the calibration is cached (None: not cached).
        calibrate: measure (or reuse) CPU throughput and memory bandwidth, a few seconds at most;
            and, when `GPU (PyTorch)` is usable, each CUDA device's `gpu_tflops` on the GPU
            challenge's kernel (`gpu_tflops`, measured at each probe, not cached).
        recalibrate: measure the calibration again even when a quiet one is cached.
        on_stage: told "device", "calibration", "units" as each step starts (a child tells its parent).

    Returns:
        The protocol's `DeviceProfile`.
    """
    stage = on_stage or (lambda _: None)
    stage("device")
    soc = visible(device.cpu_model())[:256]  # facts the firmware wrote: printable and bounded, as adverts are
    cores = psutil.cpu_count(logical=True) or 0
    ram = device.memory_mb()
    gpus, gpu_reason = device.detect_gpus()
    versions = device.runtime_versions()
    fingerprint = device.fingerprint(soc, cores, ram, gpus)
    result = None
    if calibrate:
        stage("calibration")
        result = _calibration(cache_dir, fingerprint, versions, recalibrate)
    stage("units")
    units = probe_units()
    if result is not None and _gpu_torch(units):
        result = result.with_(gpu_tflops=gpu_tflops())
    return DeviceProfile(
        device_name=device.device_name(),
        soc=soc,
        cores_physical=psutil.cpu_count(logical=False) or 0,
        cores_logical=cores,
        ram_mb=ram,
        os=platform.system(),
        os_version=visible(device.os_version())[:256],
        arch=platform.machine(),
        gpus=gpus,
        gpu_reason=gpu_reason,
        runtimes=versions,
        units=units,
        fingerprint=fingerprint,
        calibration=result,
    )


def calibrated(
    profile: DeviceProfile, cache_dir: Path | None, *, on_stage: Callable[[str], None] | None = None
) -> DeviceProfile:
    """A profile of this device whose facts and units were kept (`drivers.probe.cache`), with its
    calibration taken now as `detect_profile` takes it (the cached figure reused on its own policy)."""
    (on_stage or (lambda _: None))("calibration")
    result = _calibration(cache_dir, profile.fingerprint, dict(profile.runtimes), False)
    if _gpu_torch(profile.units):
        result = result.with_(gpu_tflops=gpu_tflops())
    return profile.with_(calibration=result)


def _calibration(
    cache_dir: Path | None, fingerprint: str, versions: dict[str, str], force: bool
) -> Calibration:
    key = calibration.calibration_key(fingerprint, versions)
    result = calibration.calibrate(cache_dir, key, force=force)
    return result.with_(peaks=peaks.cached(cache_dir, key))  # measured by `info --bench` only


def _gpu_torch(units: tuple[UnitStatus, ...]) -> bool:
    return any(s.unit == ComputeUnit.GPU_TORCH and s.usable for s in units)
