"""The device probe's cache (`drivers.probe.cache`): a key that moves with everything that decides a
probe's answer, and a file read as untrusted bytes: a stale, foreign or broken one is a miss with its
reason, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.data import make_profile

from drivers.probe import cache
from protocol import Calibration, EndpointStatus

NOW = 1_800_000_000.0


def test_the_key_moves_with_every_input() -> None:
    inputs = cache.key_inputs({})
    assert {
        "dist:onnxruntime",
        "dist:torch",
        "python",
        "cpu",
        "ram_mb",
        "gpu_files",
        "drivers",
    } <= set(inputs)
    base = cache.probe_key(inputs)
    assert cache.probe_key(dict(inputs)) == base  # the same machine, the same key
    changed = {cache.probe_key({**inputs, name: value + "x"}) for name, value in inputs.items()}
    assert base not in changed
    assert len(changed) == len(inputs)  # each input on its own moves the key


def test_the_key_reads_the_installed_versions_and_the_variables_that_hide_gpus() -> None:
    import importlib.metadata

    inputs = cache.key_inputs({"CUDA_VISIBLE_DEVICES": ""})
    assert inputs["dist:onnxruntime"] == importlib.metadata.version("onnxruntime")
    assert inputs["dist:sark-node"] == importlib.metadata.version("sark-node")
    hidden = cache.key_inputs({"CUDA_VISIBLE_DEVICES": "-1"})
    assert cache.probe_key(hidden) != cache.probe_key(inputs)
    named = cache.key_inputs({"CUDA_VISIBLE_DEVICES": "", "SARK_PROBE_GGUF": "/models/small.gguf"})
    assert cache.probe_key(named) != cache.probe_key(inputs)  # the llama.cpp units' probe model
    from drivers.runtimes.llamaunits import PROBE_GGUF_ENV

    assert PROBE_GGUF_ENV in cache.PROBE_ENV


def test_a_kept_profile_is_read_back_without_its_calibration_and_servers(tmp_path: Path) -> None:
    calibration = Calibration(cpu_gflops=10.0, mem_bandwidth_gbs=5.0, seconds=1.0, quiet=True)
    server = EndpointStatus(name="local", usable=True, reason="")
    profile = make_profile().with_(calibration=calibration, endpoints=(server,))
    cache.store(tmp_path, "k1", profile, now=NOW)
    found = cache.read(tmp_path, "k1", now=NOW + 5)
    assert found.profile == profile.with_(calibration=None, endpoints=())
    assert found.why == "probed 5 s ago"
    assert [p.name for p in tmp_path.iterdir()] == ["probe-k1.json"]  # no temporary file left


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "no cached profile"),
        (b"\x00\xff not json", "not a valid cache entry"),
        (b"[1, 2]", "not a cache entry"),
        (b'{"key": "k1", "taken_at": "yesterday", "profile": {}}', "no time it was taken"),
        (b'{"key": "k1", "taken_at": 1800000000.0, "profile": {"soc": 3}}', "not a valid cache entry"),
        (b'{"key": "k1", "taken_at": 1800009000.0, "profile": {}}', "taken in the future"),
        (b"[" * 100_000, "not a valid cache entry"),
        (b" " * (cache.MAX_BYTES + 1), f"larger than {cache.MAX_BYTES} bytes"),
    ],
)
def test_a_missing_or_broken_file_is_a_miss_with_its_reason(
    tmp_path: Path, content: bytes | None, why: str
) -> None:
    if content is not None:
        cache.path_for(tmp_path, "k1").write_bytes(content)
    found = cache.read(tmp_path, "k1", now=NOW)
    assert found.profile is None
    assert why in found.why


def test_a_stale_or_foreign_profile_is_probed_again(tmp_path: Path) -> None:
    cache.store(tmp_path, "k1", make_profile(), now=NOW)
    old = cache.read(tmp_path, "k1", now=NOW + cache.MAX_AGE_S + 1)
    assert old.profile is None
    assert old.why.startswith(f"older than {cache.MAX_AGE_S:g} s")
    entry = json.loads(cache.path_for(tmp_path, "k1").read_text())
    cache.path_for(tmp_path, "k2").write_text(json.dumps(entry))  # another machine's, renamed
    foreign = cache.read(tmp_path, "k2", now=NOW)
    assert foreign.profile is None
    assert "its key differs" in foreign.why


def test_a_file_that_cannot_be_written_raises_and_leaves_no_half_written_one(tmp_path: Path) -> None:
    cache.path_for(tmp_path, "k1").mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(IsADirectoryError):
        cache.store(tmp_path, "k1", make_profile(), now=NOW)
    assert [p.name for p in tmp_path.iterdir()] == ["probe-k1.json"]
    assert cache.read(tmp_path, "k1", now=NOW).why.startswith("unreadable: IsADirectoryError")
