"""Device classes: which peers should time a task alike, so that their figures can check each other.

A class key is read from a peer's signed profile and names everything that moves a timing when it
differs between two devices: the CPU (SoC string and physical/logical core counts), the accelerator
(each GPU's name; none for a CPU unit), the memory size bucket, the operating system (not its patch
version), the runtime the unit runs on and its version, and the unit itself with the execution
provider its probe found. Two peers share a class exactly when all of these are equal.

What is left out, and why: the device name (owners name boards as they like; a lab of identical
boards shares one), the OS patch version (kernels of one release time a model alike; a major or minor
version is kept), the calibration figures (a measurement, not a claim: `claims.py` checks them
against the class), memory within a power-of-two bucket (8 and 16 GiB machines differ in what they
can load, not in how fast a model that fits runs; the bucket still splits a 4 GiB board from a 64 GiB
server).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from protocol import ComputeUnit, DeviceProfile
from protocol.units import RUNTIME_OF

_GPU_UNITS = frozenset({ComputeUnit.GPU_ONNX, ComputeUnit.GPU_TORCH, ComputeUnit.GPU_COREML})


@dataclass(frozen=True, order=True)
class DeviceClass:
    """A device class: the full key (what it is made of) and a short name to show.

    Attributes:
        key: the parts joined with `|`, e.g. `cpu=AMD EPYC 7B13/2c2t|acc=-|ram=16GiB|os=Linux 6|...`.
    """

    key: str

    @property
    def name(self) -> str:
        """`cls-` and 8 hex digits of the key's sha256: short enough for a table column; for display
        only (a profile ground to share 32 bits costs about 2^32 hashes: no rule compares it)."""
        return self.id[:12]

    @property
    def id(self) -> str:
        """`cls-` and the key's whole sha256 (64 hex digits): what a rule that names a class (a
        campaign's price) is compared with, whole; its first 12 characters are `name`."""
        return f"cls-{hashlib.sha256(self.key.encode()).hexdigest()}"


def memory_bucket_gib(ram_mb: int) -> int:
    """The memory bucket: the nearest power of two in GiB (0 for an unknown size)."""
    if ram_mb <= 0:
        return 0
    return int(2 ** round(math.log2(max(ram_mb / 1024, 0.5))))


def major_minor(version: str) -> str:
    """A version's first two dotted parts ('6.1.0-18-amd64' -> '6.1')."""
    return ".".join(version.split("-")[0].split(".")[:2])


def device_class(profile: DeviceProfile, unit: ComputeUnit) -> DeviceClass:
    """The class a peer's timings on `unit` belong to."""
    status = profile.unit_status(unit)
    provider = status.provider if status is not None and status.provider else "-"
    runtime = RUNTIME_OF[unit].value
    version = major_minor(profile.runtimes.get(runtime, "?"))
    accelerator = "+".join(sorted(g.name for g in profile.gpus)) if unit in _GPU_UNITS else ""
    parts = (
        f"cpu={profile.soc}/{profile.cores_physical}c{profile.cores_logical}t",
        f"acc={accelerator or '-'}",
        f"ram={memory_bucket_gib(profile.ram_mb)}GiB",
        f"os={profile.os} {major_minor(profile.os_version)}",
        f"rt={runtime} {version}",
        f"unit={unit.value}/{provider}",
    )
    return DeviceClass("|".join(parts))
