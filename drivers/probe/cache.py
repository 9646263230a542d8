"""The device probe's cache: a profile's facts and units kept in a file, keyed by what decides them.

A probe imports every runtime and runs a tiny model on each (seconds; tens of seconds on a loaded
machine), and its answer changes only when the machine does. `probe_key` hashes everything that
decides it, read without importing a runtime: each runtime distribution's version (package metadata,
found on the import path the probe child imports them from), the Python, the OS and CPU, the cores
and RAM, the GPU device files, `nvidia-smi` and the driver's version, the variables that hide GPUs,
and `FORMAT`. A file under another key is another machine's answer (or this one's before an upgrade)
and is not read; one older than `MAX_AGE_S` is probed again, for what no key sees (a driver that
broke without a new version).

Only the facts and the units are kept: the calibration has its own cache and policy (a figure taken
under load is taken again on a quiet machine, `drivers.measuring.calibrate`) and declared servers are
live, so both are taken again at every start (`drivers.probe.apart`).

The file is untrusted bytes (another user's, a half-written one, an older format): read with a size
limit and validated by the protocol's model; anything else is a miss with its reason, never a crash.
The cheater gains nothing here: a worker's profile is its own word whatever its source (`join
--profile` gives any), and what the swarm relies on is checked by challenges, not by the profile.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from drivers.measuring import device
from protocol import DeviceProfile

FORMAT: Final = 1
"""The cache's own version: raised when the probe changes what it finds, so older files are misses."""
MAX_AGE_S: Final = 24 * 3600.0
"""A cached profile older than this is probed again."""
MAX_BYTES: Final = 256 * 1024
"""The most a cache file is read of; a larger one is not a profile this code wrote."""
EXTRA_DISTS: Final = ("transformers", "tflite-runtime", "sark-node")
"""Distributions beyond the runtimes' (`device.RUNTIME_DISTS`) whose version changes a unit's probe."""
GPU_ENV: Final = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ONEAPI_DEVICE_SELECTOR",
    "ZE_AFFINITY_MASK",
)
"""Variables that hide or select GPUs."""
PROBE_ENV: Final = ("SARK_PROBE_GGUF",)
"""Variables that name what a unit's probe runs: the llama.cpp units' GGUF
(`drivers.runtimes.llamaunits.PROBE_GGUF_ENV`, named here so that the daemon, which keys its probe
cache, never imports a runtime's module)."""
GPU_FILES: Final = ("/dev/nvidia*", "/dev/dri/*", "/dev/accel/*", "/dev/kfd")
"""Device files whose appearance or loss means a GPU or NPU came or went."""
DRIVER_FILES: Final = (
    "/proc/driver/nvidia/version",
    "/sys/module/nvidia/version",
    "/sys/module/amdgpu/version",
)


@dataclass(frozen=True)
class Lookup:
    """A cache lookup: the profile when the file held one for this key, else why not."""

    profile: DeviceProfile | None
    why: str
    path: Path


def key_inputs(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Everything a probe's answer depends on, read without importing a runtime."""
    env = os.environ if env is None else env
    inputs = {f"dist:{role}": v for role, v in device.runtime_versions().items()}
    for dist in EXTRA_DISTS:
        inputs[f"dist:{dist}"] = _version(dist)
    inputs |= {
        "format": str(FORMAT),
        "python": f"{sys.executable} {sys.version}",
        "platform": platform.platform(),
        "machine": platform.machine(),
        "node": platform.node(),
        "cpu": device.cpu_model(),
        "cores": f"{os.cpu_count()}",
        "ram_mb": str(device.memory_mb()),
        "smi": shutil.which("nvidia-smi") or "",
        "gpu_files": " ".join(sorted(str(p) for pattern in GPU_FILES for p in _glob(pattern))),
        "drivers": " | ".join(_head(Path(f)) for f in DRIVER_FILES),
    }
    inputs |= {f"env:{name}": env.get(name, "") for name in (*GPU_ENV, *PROBE_ENV)}
    return inputs


def probe_key(inputs: Mapping[str, str]) -> str:
    """The cache key: 24 hex of sha256 over the inputs, sorted by name."""
    text = json.dumps(dict(inputs), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def path_for(folder: Path, key: str) -> Path:
    """The cache file of one key in `folder`."""
    return folder / f"probe-{key}.json"


def read(folder: Path, key: str, *, now: float | None = None, max_age_s: float = MAX_AGE_S) -> Lookup:
    """The cached profile for `key`, or None with the reason (missing, too large, not a profile,
    another key's, too old, from the future)."""
    path = path_for(folder, key)
    now = time.time() if now is None else now
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return Lookup(None, "no cached profile", path)
    except OSError as exc:
        return Lookup(None, f"unreadable: {type(exc).__name__}: {exc.strerror or exc}", path)
    if len(raw) > MAX_BYTES:
        return Lookup(None, f"larger than {MAX_BYTES} bytes", path)
    try:
        entry = json.loads(raw)
        if not isinstance(entry, dict):
            return Lookup(None, "not a cache entry (no JSON object)", path)
        said, taken = entry.get("key"), entry.get("taken_at")
        if said != key:
            return Lookup(None, "another machine's or another install's (its key differs)", path)
        if not isinstance(taken, (int, float)) or isinstance(taken, bool):
            return Lookup(None, "no time it was taken", path)
        if taken > now + 60:
            return Lookup(None, "taken in the future (a clock moved back?)", path)
        if now - taken > max_age_s:
            return Lookup(None, f"older than {max_age_s:g} s ({now - taken:.0f} s)", path)
        profile = DeviceProfile.model_validate(entry.get("profile"))
    except (ValueError, RecursionError) as exc:  # json's and pydantic's (ValidationError is one)
        count = f"{exc.error_count()} errors" if isinstance(exc, ValidationError) else type(exc).__name__
        return Lookup(None, f"not a valid cache entry ({count})", path)
    return Lookup(profile, f"probed {now - taken:.0f} s ago", path)


def store(folder: Path, key: str, profile: DeviceProfile, *, now: float | None = None) -> Path:
    """Keep the profile's facts and units under `key` (no calibration, no servers: taken at each
    start); written whole or not at all.

    Raises:
        OSError: the folder cannot be written.
    """
    kept = profile.with_(calibration=None, endpoints=())
    entry = {
        "key": key,
        "taken_at": time.time() if now is None else now,
        "profile": kept.model_dump(mode="json"),
    }
    path = path_for(folder, key)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # several processes may share a folder
    try:
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise
    return path


def _version(dist: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _glob(pattern: str) -> list[Path]:
    base = Path(pattern)
    try:
        return list(base.parent.glob(base.name))
    except OSError:
        return []


def _head(path: Path) -> str:
    """The first line of a small system file ("" when absent)."""
    try:
        with path.open("rb") as file:
            return file.read(512).decode(errors="replace").splitlines()[0] if path.is_file() else ""
    except (OSError, IndexError):
        return ""


__all__ = ["FORMAT", "MAX_AGE_S", "Lookup", "key_inputs", "path_for", "probe_key", "read", "store"]
