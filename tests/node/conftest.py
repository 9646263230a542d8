"""Fixtures of the swarm tests: a device profile, hosts on loopback, the process lab."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from node.host import Host, HostConfig, open_host
from protocol import ComputeUnit, DeviceProfile, UnitStatus

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the reusable lab lives in tests/lab
from lab.procs import Lab  # noqa: E402

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


def make_profile(name: str = "lab-device") -> DeviceProfile:
    """A small truthful-looking profile: CPU (ONNX) usable, GPU (ONNX) not."""
    return DeviceProfile(
        device_name=name, soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),
               UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=False, reason="no GPU")),
    )


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(make_profile().model_dump_json())
    return path


@pytest.fixture
async def host_pair(tmp_path: Path) -> AsyncIterator[tuple[Host, Host]]:
    async with (
        open_host(HostConfig(key_file=tmp_path / "a.key", listen=LOOPBACK)) as a,
        open_host(HostConfig(key_file=tmp_path / "b.key", listen=LOOPBACK)) as b,
    ):
        yield a, b


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path, record_ttl=4.0)
    try:
        yield lab
    finally:
        lab.close()
