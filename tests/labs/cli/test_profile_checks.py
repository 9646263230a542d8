"""The edge: a profile's names and facts are printable and bounded, on the worker that advertises them.

A formula or rich markup is printable text and passes (the output seams neutralise it); a control
character or an over-long name is refused, naming the field: `join` exits 2 before it advertises.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kit import zygote
from kit.data import make_profile
from kit.procs import SARK
from pydantic import ValidationError

from node.errors import ConfigError
from node.worker.role import checked
from protocol import DeviceProfile, EndpointStatus, GpuInfo


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("device_name", "\x1b[2J"),
        ("device_name", "pixel\x07"),
        ("device_name", "x" * 129),
        ("soc", "arm\x9b31m"),
        ("os", "Linux\x00"),
        ("os_version", "14\n(patched)"),
        ("os_version", "\u202etxt.exe"),
        ("arch", "arm64\x7f"),
        ("fingerprint", "f" * 257),
        ("runtimes", {"onnxruntime": "1.2\x1b]8;;http://evil\x07"}),
        ("runtimes", {"\x1b": "1"}),
    ],
)
def test_a_control_character_or_a_long_fact_is_refused(field: str, value: object) -> None:
    good = make_profile().model_dump()
    with pytest.raises(ValidationError, match=field):
        DeviceProfile.model_validate({**good, field: value})
    with pytest.raises(ConfigError, match=field):
        checked(make_profile().with_(**{field: value}))


def test_gpu_and_endpoint_names_are_facts_too() -> None:
    with pytest.raises(ValidationError):
        GpuInfo(name="RTX\x1b[2J", vram_mb=1, source="nvml")
    with pytest.raises(ValidationError):
        EndpointStatus(name="srv", model="m\x07", usable=True)
    with pytest.raises(ValidationError):
        EndpointStatus(name="s" * 65, usable=True)


@pytest.mark.parametrize(
    "name", ['=HYPERLINK("http://evil","x")', "[bold red]x[/bold red]", "Pixel 8 | `pro` <b>", "名前 ✓"]
)
def test_printable_text_passes_the_edge(name: str) -> None:
    assert checked(make_profile(name)).device_name == name


NOWHERE = "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWGzh9Yd6Nq4A7m8L7nbiFfXdbKsaBdSiQdFzURtHjnDdk"


def _join(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(
        [*SARK, "join", "--gate", NOWHERE, "--open", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_join_refuses_a_device_name_with_escapes() -> None:
    done = _join("--device-name", "\x1b[2J\x1b]8;;http://evil\x07x")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "device_name" in done.stderr
    assert "control characters" in done.stderr
    assert "\x1b" not in done.stderr
    assert "\x07" not in done.stderr


def test_join_refuses_a_profile_file_with_escapes(tmp_path: Path) -> None:
    profile = make_profile().model_dump(mode="json") | {"soc": "arm\x1b[31m", "os_version": "1\x07"}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    done = _join("--profile", str(path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "soc" in done.stderr
    assert "os_version" in done.stderr
    assert "\x1b" not in done.stderr
