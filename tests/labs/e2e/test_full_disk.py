"""Issue 23: full disks, on small tmpfs mounts (root only; skipped with the reason otherwise).

The submitter's results folder full: one line naming the folder and the file, exit 1, no partial file;
`submit --resume` writes the files once there is room. A worker whose model cache is full fails the
task with reason `disk` naming its cache folder, and serves the next campaign once there is room.
"""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, submitter_id, write_campaign
from kit.procs import SARK

from node.config import NodeConfig

SMALL_JOB = {"num_inference_runs": 20, "warmup_runs": 2, "load_runs": 1, "processes": 1}


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path` for the block; skips the test when mounting is refused."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = zygote.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        zygote.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """A file that takes every free block of `folder`'s file system."""
    filler = folder / "filler"
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)
    assert filler.stat().st_size > 0
    return filler


def _sark(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return zygote.run([*SARK, *args], capture_output=True, text=True, timeout=timeout)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_full_results_folder_one_line_then_resume_writes_the_files(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": 1, **SMALL_JOB}],
    })  # fmt: skip
    data = ["--data-dir", str(tmp_path / "submitter")]
    with tmpfs(tmp_path / "out", "2m") as out:  # room for the files (report.html ~0.1 MB) once freed
        filler = fill(out)
        failed = _sark("submit", str(campaign), "--json", "--out", str(out), *data)
        assert failed.returncode == 1, failed.stderr
        lines = failed.stderr.splitlines()
        assert len(lines) == 1, failed.stderr
        assert lines[0].startswith(f"error: no space left on {out}/campaign-"), lines[0]
        assert "while writing results.csv" in lines[0]
        assert "Traceback" not in failed.stderr
        assert [p.name for p in out.rglob("*") if p.is_file()] == ["filler"]  # no partial file

        campaign_id = Path(lines[0].split()[5]).name
        filler.unlink()  # room again
        done = _sark("submit", "--resume", campaign_id, "--json", *data)
        assert done.returncode == 0, done.stderr + done.stdout[-3000:]  # the rows say why a task failed
        files = json.loads(done.stdout.strip().splitlines()[-1])["files"]
        assert sorted(files) == ["bundle", "csv", "html", "json"]  # the bundle sealed with the node's key
        assert [row["Status"] for row in _rows(Path(files["csv"]))] == ["Complete"]


def test_a_worker_with_a_full_cache_fails_the_task_with_disk_and_serves_on(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    cache = NodeConfig(data_dir=tmp_path / "w0").data.models
    submitter = tmp_path / "submitter"
    try:
        with tmpfs(cache, "64k"):  # the model is 311 KiB
            gate = lab.gate().ready["addrs"][0]
            worker = lab.real_worker("w0", [gate], submitter_id(submitter))
            job = {"compute_unit": "CPU (ONNX)", "devices": 1, **SMALL_JOB}
            campaign = write_campaign(tmp_path / "c.yaml", {"model": {"path": MODEL.name}, "jobs": [job]})
            args = ["submit", str(campaign), "--json", "--wait-peers", "1", "--gate", gate]
            args += ["--data-dir", str(submitter), "--out", str(tmp_path / "out")]

            failed = _sark(*args)
            assert failed.returncode == 1, failed.stderr
            (row,) = _rows(Path(json.loads(failed.stdout.strip().splitlines()[-1])["files"]["csv"]))
            assert (row["Status"], row["FailureReason"]) == ("Failed", "disk"), row
            assert f"no space left on {cache} while storing model {MODEL.name}" in row["Detail"]
            assert list(cache.iterdir()) == []  # the partial model was removed

            zygote.run(["mount", "-o", "remount,size=4m", str(cache)], check=True)  # room again
            done = _sark(*args)
            assert done.returncode == 0, done.stderr
            (row,) = _rows(Path(json.loads(done.stdout.strip().splitlines()[-1])["files"]["csv"]))
            assert (row["Status"], row["WorkerPeerId"]) == ("Complete", worker.ready["peer_id"])
            assert worker.popen.poll() is None  # the same worker process served both
            assert "Traceback" not in worker.log_excerpt(lines=1000)
    finally:
        lab.close()


def test_a_full_model_cache_on_the_submitter_is_one_line(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "devices": 1, **SMALL_JOB}],
    })  # fmt: skip
    data = tmp_path / "submitter"
    with tmpfs(NodeConfig(data_dir=data).data.models, "64k") as models:
        failed = _sark("submit", str(campaign), "--json", "--data-dir", str(data))
        assert failed.returncode == 1, failed.stderr
        assert failed.stderr.splitlines() == [
            f"error: no space left on {models} while storing model {MODEL.name} (0.3 MB)"
        ]
        assert list(models.iterdir()) == []  # the partial copy was removed
