"""Plain test data shared by the swarm tests."""

from __future__ import annotations

from protocol import ComputeUnit, DeviceProfile, UnitStatus


def make_profile(name: str = "lab-device") -> DeviceProfile:
    """A small truthful-looking profile: CPU (ONNX) usable, GPU (ONNX) not."""
    return DeviceProfile(
        device_name=name,
        soc="test-cpu",
        cores_physical=1,
        cores_logical=2,
        ram_mb=1024,
        os="Linux",
        os_version="6",
        fingerprint="f" * 16,
        units=(
            UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),
            UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=False, reason="no GPU"),
        ),
    )
