"""Issue 5 end to end: `sark-node submit` against a gate and real worker processes on loopback."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

from kit.campaignlab import MODEL, Swarm, write_campaign

from scheduler import CSV_COLUMNS

SEED_COLUMNS = [
    "Status", "JobId", "FileName", "FileSize", "ComputeUnits", "DeviceName", "Soc", "Ram", "DeviceOs",
    "LoadMsMedian", "LoadMsAverage", "LoadMsStdDev", "PeakLoadRamUsage", "InferenceMsMedian",
    "InferenceMsAverage", "InferenceMsStdDev", "PeakInferenceRamUsage",
]  # fmt: skip

SMALL_JOB = {"num_inference_runs": 30, "warmup_runs": 3, "load_runs": 1, "processes": 1}


def _submit(swarm: Swarm, campaign: Path, *extra: str, code: int = 0) -> dict[str, Any]:
    done = swarm.run(
        "submit",
        str(campaign),
        "--json",
        "--wait-peers",
        str(len(swarm.workers)),
        "--out",
        str(campaign.parent / "out"),
        *extra,
    )
    assert done.returncode == code, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


def _rows(outcome: dict[str, Any]) -> list[dict[str, str]]:
    with open(outcome["files"]["csv"], newline="") as f:
        return list(csv.DictReader(f))


def _model_events(swarm: Swarm) -> list[str]:
    return [e["source"] for events in swarm.drain().values() for e in events if e["event"] == "model"]


def test_cpu_job_on_every_worker_and_gpu_job_unschedulable(swarm3: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "campaign.yaml", {
        "name": "acceptance-2",
        "model": {"path": MODEL.name},
        "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **SMALL_JOB},
                 {"compute_unit": "GPU (ONNX)", **SMALL_JOB}],
    })  # fmt: skip
    swarm3.drain()
    outcome = _submit(swarm3, campaign)

    tasks = outcome["tasks"]
    cpu = [t for t in tasks if t["unit"] == "CPU (ONNX)"]
    assert [t["state"] for t in cpu] == ["done"] * 3
    assert {t["peer_id"] for t in cpu} == set(swarm3.workers)
    gpu = [t for t in tasks if t["unit"] == "GPU (ONNX)"]
    assert [t["state"] for t in gpu] == ["unschedulable"]
    for peer in swarm3.workers:  # every peer's own reason is named
        assert any(peer in reason and "GPU (ONNX) unavailable" in reason for reason in gpu[0]["reasons"])

    rows = _rows(outcome)
    with open(outcome["files"]["csv"], newline="") as f:
        header = next(csv.reader(f))
    assert header[: len(SEED_COLUMNS)] == SEED_COLUMNS
    assert header == list(CSV_COLUMNS)
    assert sorted(r["Status"] for r in rows) == ["Complete"] * 3 + ["Unschedulable"]
    for row in rows:
        if row["Status"] == "Complete":
            assert float(row["InferenceMsMedian"]) > 0
            assert row["SignatureStatus"] == "verified"
            assert row["ModelSha256"] == hashlib.sha256(MODEL.read_bytes()).hexdigest()
            # the model's batch dimension is dynamic: the inputs fed are recorded, the default flagged
            assert (row["InputShapes"], row["InputsDefaulted"]) == ("input:float32[1,3,64,64]", "True")
    document = json.loads(Path(outcome["files"]["json"]).read_text())
    assert document["swarm"] == [swarm3.gate]  # where the figures came from, in every medium
    assert f"swarm: gate {swarm3.gate}" in Path(outcome["files"]["html"]).read_text()
    assert all(len(r["samples_ms"]) == 30 for r in document["results"] if r["row"]["Status"] == "Complete")
    # each worker got the model once over /sark/blob: from the submitter, or from a worker that had it
    sources = _model_events(swarm3)
    assert len(sources) == 3
    assert set(sources) <= {"blob", "peer"}
    assert sources.count("blob") >= 1

    # a second campaign on the same bytes moves none: every worker has it cached
    again = _submit(swarm3, campaign)
    assert [t["state"] for t in again["tasks"] if t["unit"] == "CPU (ONNX)"] == ["done"] * 3
    assert sorted(_model_events(swarm3)) == ["cache"] * 3


def test_plan_gives_the_same_reasons_and_sends_nothing(swarm3: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "campaign.yaml", {
        "model": {"path": MODEL.name},
        "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all"}, {"compute_unit": "GPU (ONNX)"}],
    })  # fmt: skip
    swarm3.drain()
    done = swarm3.run("plan", str(campaign), "--json", "--wait-peers", "3")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    cpu, gpu = plan["jobs"]
    assert sorted(cpu["chosen"]) == sorted(swarm3.workers)
    assert gpu["chosen"] == []
    assert {r["peer_id"] for r in gpu["rejected"]} == set(swarm3.workers)
    assert all("GPU (ONNX) unavailable" in " ".join(r["reasons"]) for r in gpu["rejected"])
    assert all(not events for events in swarm3.drain().values())  # no offer reached a worker


def test_malformed_campaign_exits_2_naming_each_field(swarm3: Swarm, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "bad.yaml", {
        "model": {"path": MODEL.name, "sha256": "not-a-digest"},
        "jobs": [{"compute_unit": "TPU (ONNX)"}, {"compute_unit": "CPU (ONNX)", "num_inference_runs": -5},
                 {"compute_unit": "CPU (ONNX)", "warmup_runs": "ten"}],
    })  # fmt: skip
    swarm3.drain()
    done = swarm3.run("submit", str(campaign))
    assert done.returncode == 2
    for field in (
        "model.sha256",
        "jobs[0].compute_unit",
        "jobs[1].num_inference_runs",
        "jobs[2].warmup_runs",
    ):
        assert field in done.stderr
    assert "Traceback" not in done.stderr
    assert all(not events for events in swarm3.drain().values())


def test_model_by_url_digest_mismatch_fails_the_task_and_leaves_nothing(
    swarm3: Swarm, tmp_path: Path, model_server: str
) -> None:
    wrong = "0" * 63 + "1"
    campaign = write_campaign(tmp_path / "url.yaml", {
        "models": [{"url": f"{model_server}/{MODEL.name}", "sha256": wrong, "name": "bad"},
                   {"url": f"{model_server}/{MODEL.name}", "name": "good"}],
        "jobs": [{"compute_unit": "CPU (ONNX)", "model": "bad", "devices": 1, **SMALL_JOB},
                 {"compute_unit": "CPU (ONNX)", "model": "good", "devices": 1, **SMALL_JOB}],
    })  # fmt: skip
    outcome = _submit(swarm3, campaign, "--allow-http", "--allow-network", "127.0.0.0/8", code=1)
    bad, good = outcome["tasks"]
    assert bad["state"] == "failed"
    assert bad["failure_reason"] == "digest_mismatch"
    assert (bad["failure_stage"], bad["detail"][:20]) == ("verify", "bad: verify failed: ")
    assert "sha256" in bad["detail"]
    assert good["state"] == "done"
    for proc_dir in (swarm3.root / name / "models" for name in ("w0", "w1", "w2")):
        leftovers = [p.name for p in proc_dir.glob("*")] if proc_dir.exists() else []
        assert not [name for name in leftovers if name.startswith(wrong) or name.endswith(".part")]
