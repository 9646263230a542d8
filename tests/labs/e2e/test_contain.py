"""Issue 13: no input takes a worker down and no failure hides.

A gate and ONE real worker process. Every broken model file of `tests/kit/badfiles` is submitted in a
campaign of its own: the submitter's inspection refuses it first (exit 2 naming the file and the
stage, nothing dispatched: issue 30), or the task fails on the worker with the file's name and the
stage in its detail and in the result row and `submit` exits 1; the same worker process stays up and
then completes a good campaign (the worker's child on every bad file:
tests/unit/drivers/files/test_contain.py).
Then the other exit codes: --strict, a campaign bomb (2), `peers` with no gate answering (1).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.badfiles import BAD_FILES, BILLION_LAUGHS
from kit.campaignlab import Swarm, start_swarm, submitter_id, write_campaign
from kit.procs import SARK

JOB = {
    "compute_unit": "CPU (ONNX)",
    "num_inference_runs": 3,
    "warmup_runs": 1,
    "load_runs": 1,
    "processes": 1,
}


@pytest.fixture(scope="module")
def swarm1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    swarm = start_swarm(tmp_path_factory.mktemp("swarm1"), 1)
    try:
        yield swarm
    finally:
        swarm.lab.close()


def _submit(swarm: Swarm, campaign: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = campaign.parent / "out"
    done = swarm.run("submit", str(campaign), "--json", "--wait-peers", "1", "--out", str(out), *extra)
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    return done.returncode, outcome, done.stderr


def _rows(outcome: dict[str, Any]) -> list[dict[str, str]]:
    with open(outcome["files"]["csv"], newline="") as f:
        return list(csv.DictReader(f))


def test_every_bad_file_fails_named_and_placed_and_the_worker_then_completes_a_good_one(
    swarm1: Swarm, tmp_path: Path
) -> None:
    [worker] = swarm1.workers.values()
    for file_name, (build, stage) in BAD_FILES.items():
        folder = tmp_path / file_name.replace(".", "-")
        folder.mkdir()
        build(folder / file_name)
        campaign = folder / "campaign.yaml"
        campaign.write_text(
            json.dumps({"name": f"bad-{file_name}", "model": {"path": file_name}, "jobs": [JOB]})
        )
        code, outcome, stderr = _submit(swarm1, campaign)
        if code == 2:  # the submitter's own inspection refused it before any worker was sent it
            assert f"{file_name}: {stage.value} failed: " in stderr, stderr
            assert "refused here, before any worker is sent it" in stderr, stderr
            assert not outcome, outcome
            assert worker.popen.poll() is None
            continue
        assert code == 1, f"{file_name}: {stderr}"
        assert "0 of 1 tasks completed (1 failed)" in stderr
        [task] = outcome["tasks"]
        assert task["state"] == "failed", task
        assert task["failure_reason"] == "format", task
        assert task["failure_stage"] == stage.value
        assert task["detail"].startswith(f"{file_name}: {stage.value} failed: "), task["detail"]
        [row] = _rows(outcome)
        assert (row["Status"], row["FileName"], row["FailureStage"]) == ("Failed", file_name, stage.value)
        assert worker.popen.poll() is None, f"the worker died on {file_name}:\n{worker.log_excerpt()}"

    # the same worker then completes a good campaign; its GPU job no peer can take is reported
    # Unschedulable and does not fail the run, unless --strict
    (tmp_path / "good").mkdir()
    gpu = JOB | {"compute_unit": "GPU (ONNX)"}
    body = {"name": "good", "model": {"path": "tiny-convnet.onnx"}, "jobs": [JOB, gpu]}
    good = write_campaign(tmp_path / "good" / "campaign.yaml", body)
    code, outcome, stderr = _submit(swarm1, good)
    assert code == 0, stderr
    assert [t["state"] for t in outcome["tasks"]] == ["done", "unschedulable"]
    assert sorted(r["Status"] for r in _rows(outcome)) == ["Complete", "Unschedulable"]
    code, outcome, stderr = _submit(swarm1, good, "--strict")
    assert code == 1
    assert "1 of 2 tasks completed (1 unschedulable)" in stderr
    assert worker.popen.poll() is None


def test_a_billion_laughs_campaign_exits_2_with_its_reason(swarm1: Swarm, tmp_path: Path) -> None:
    campaign = tmp_path / "bomb.yaml"
    campaign.write_text(BILLION_LAUGHS)
    done = swarm1.run("submit", str(campaign))
    assert done.returncode == 2
    assert "alias" in done.stderr
    assert "Traceback" not in done.stderr


def test_peers_exits_1_when_no_gate_answers(swarm1: Swarm, tmp_path: Path) -> None:
    stranger = submitter_id(tmp_path / "stranger")  # the gate's address, someone else's identity
    wrong = swarm1.gate.rsplit("/p2p/", 1)[0] + f"/p2p/{stranger}"
    done = zygote.run(
        [*SARK, "peers", "--gate", wrong, "--timeout", "2", "--data-dir", str(tmp_path / "p")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "no gate answered" in done.stderr
    assert "Traceback" not in done.stderr
    right = zygote.run(
        [
            *SARK,
            "peers",
            "--gate",
            swarm1.gate,
            "--json",
            "--timeout",
            "10",
            "--data-dir",
            str(tmp_path / "p"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert right.returncode == 0, right.stderr
