"""The device probe and declared-server probes run in a spawned child that sends JSON back; a child
that fails, dies or outlives its deadline is a `ProbeFailed` naming the stage it had reached."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from kit import zygote
from kit.procs import SARK
from kit.sse_server import Reply, scheduled, serve_sse

import drivers
from protocol import ComputeUnit, DeviceProfile

LISTING = b'{"object": "list", "data": [{"id": "tiny-chat"}]}'


def _server(body: dict[str, object], attempt: int) -> Reply:
    if not body:  # GET /v1/models
        return Reply(200, (("content-type", "application/json"),), ((0.0, LISTING),))
    return scheduled(["OK"], usage=(3, 1))


async def test_the_child_detects_the_device_and_probes_the_declared_servers(tmp_path: Path) -> None:
    with serve_sse(_server) as server:
        declared = {"local": server.url}
        profile = await drivers.detect_profile_apart(tmp_path, calibrate=False, declared=declared)
    assert isinstance(profile, DeviceProfile)
    assert ComputeUnit.CPU_ONNX in profile.usable_units()
    assert [(e.name, e.model, e.usable) for e in profile.endpoints] == [("local", "tiny-chat", True)]


async def test_the_servers_alone_are_probed_in_a_child() -> None:
    with serve_sse(_server) as server:
        url = server.url
    (status,) = await drivers.probe_servers_apart({"gone": url})
    assert (status.name, status.usable) == ("gone", False)
    assert "GET /v1/models failed" in status.reason


async def test_a_failing_step_is_named_by_its_stage(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "calibration"
    not_a_folder.write_text("a file where the calibration cache should be")
    with pytest.raises(drivers.ProbeFailed) as failed:
        await drivers.detect_profile_apart(not_a_folder / "cache", calibrate=True)
    assert failed.value.stage == "calibration"
    assert "NotADirectoryError" in failed.value.why or "FileExistsError" in failed.value.why


async def test_a_child_past_its_deadline_is_killed_and_named(tmp_path: Path) -> None:
    with pytest.raises(drivers.ProbeFailed) as failed:
        await drivers.detect_profile_apart(tmp_path, calibrate=False, timeout_s=0.05)
    assert failed.value.stage == "start"
    assert "timed out" in failed.value.why


async def test_a_second_probe_on_an_unchanged_machine_reuses_the_first_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="drivers.probe.apart")
    kept = tmp_path / "probe-cache"
    first = await drivers.detect_profile_apart(tmp_path, calibrate=False, probe_cache=kept)
    assert "device probe runs: no cached profile" in caplog.text
    caplog.clear()
    with serve_sse(_server) as server:  # a declared server is probed at every start, never kept
        again = await drivers.detect_profile_apart(
            tmp_path, calibrate=True, declared={"local": server.url}, probe_cache=kept
        )
    assert "device probe reused: probed" in caplog.text
    assert again.units == first.units
    assert again.fingerprint == first.fingerprint
    assert again.calibration is not None  # taken by the child, on the calibration's own cache
    assert [(e.name, e.usable) for e in again.endpoints] == [("local", True)]
    caplog.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # a changed machine: GPUs hidden
    await drivers.detect_profile_apart(tmp_path, calibrate=False, probe_cache=kept)
    assert "device probe runs: no cached profile" in caplog.text
    assert len(list(kept.glob("probe-*.json"))) == 2


def test_join_says_which_probe_stage_failed_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "worker"
    data.mkdir()
    (data / "profile").write_text("not a folder: the calibration cache goes here")
    gate = "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SARK_")}
    argv = [*SARK, "join", "--gate", gate, "--open", "--data-dir", str(data)]
    done = zygote.run(
        [*argv, "--listen", "/ip4/127.0.0.1/tcp/0"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "this device could not be probed: calibration failed" in done.stderr
