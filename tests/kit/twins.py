"""Two device boards whose classes share a short name and differ whole (issue 50, scope 7).

A class's short name (`DeviceClass.name`: `cls-` and 8 hex digits) is 32 bits of its key's sha256,
so a birthday search over SoC strings meets a pair in about 2^16 tries (a second or two here): what
two colluding boards, or one ground against a given class (about 2^32), would present. Rules compare
the whole key; these boards are how the tests show it.
"""

from __future__ import annotations

import functools
import hashlib
import os

from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus
from scheduler.verification.classes import device_class


def board(soc: str) -> DeviceProfile:
    """A CPU board of this machine's core count whose class key is set by `soc`."""
    cores = os.cpu_count() or 1
    return DeviceProfile(
        device_name=soc, soc=soc, cores_physical=cores, cores_logical=cores, ram_mb=1024, os="Linux",
        os_version="6", fingerprint=hashlib.sha256(soc.encode()).hexdigest()[:16],
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=5.0, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip


@functools.cache
def colliding() -> tuple[DeviceProfile, DeviceProfile]:
    """Two boards whose CPU (ONNX) classes share a short name and differ whole."""
    seen: dict[str, DeviceProfile] = {}
    for i in range(1 << 22):
        found = board(f"board-{i}")
        cls = device_class(found, ComputeUnit.CPU_ONNX)
        if cls.name in seen:
            return seen[cls.name], found
        seen[cls.name] = found
    raise AssertionError("no pair of short names met")
