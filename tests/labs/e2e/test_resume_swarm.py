"""Issue 30: a fleet submitter SIGKILLed mid-run shows `running (submitter gone)` in `status`, and
`submit --resume CAMPAIGN` as README writes it (no --gate, no --data-dir: a fresh HOME) reclaims
from the fleet, never from an embedded local swarm; a configured gate that differs is refused.
Issue 41: the resume says what it took over (tasks done, leases to reclaim, tasks queued again)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, write_campaign
from kit.procs import SARK, Proc
from kit.sizing import timed_job


def _home(tmp_path: Path) -> dict[str, str]:
    """A new user's environment: a fresh HOME, no sark-node settings, no XDG folders of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))}
    return {**env, "HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}


def _sark(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 240.0
) -> subprocess.CompletedProcess[str]:
    return zygote.run([*SARK, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _measuring(worker: Proc, timeout: float = 120.0) -> str:
    return str(worker.wait_event("measuring", timeout)["task"])


def test_a_killed_fleet_submitter_resumed_without_gate_reclaims_from_the_fleet(tmp_path: Path) -> None:
    env = _home(tmp_path)
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        gate = lab.gate().ready["addrs"][0]
        me = _sark(env, tmp_path, "id").stdout.strip()  # README: a submitter's peer id for the owners
        worker = lab.real_worker("w0", [gate], me)
        campaign = write_campaign(tmp_path / "campaign.yaml", {
            "name": "fleet", "model": {"path": MODEL.name},
            "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **timed_job(8.0, 4000)}],
        })  # fmt: skip
        submitter = lab.start("submitter", [*SARK, "submit", str(campaign), "--gate", gate], env=env)
        task = _measuring(worker)
        lab.kill(submitter)  # SIGKILL: no Ctrl-C path, the store still says "running"
        campaign_id = task.rsplit("-job-", 1)[0]

        listed = _sark(env, tmp_path, "status", "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)["campaigns"]
        assert (row["campaign_id"], row["status"]) == (campaign_id, "running (submitter gone)")
        table = _sark({**env, "COLUMNS": "80"}, tmp_path, "status")
        assert "running (submitter gone)" in table.stdout, table.stdout

        elsewhere = (
            f"/ip4/127.0.0.1/tcp/9/p2p/{worker.ready['peer_id']}"  # a configured gate of another swarm
        )
        refused = _sark({**env, "SARK_GATES": elsewhere}, tmp_path, "submit", "--resume", campaign_id)
        assert refused.returncode == 2, refused.stderr
        assert gate in refused.stderr, refused.stderr  # both swarms named
        assert elsewhere in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr

        resumed = _sark(env, tmp_path, "submit", "--resume", campaign_id)  # README's line, as written
        assert resumed.returncode == 0, resumed.stderr
        took_over = (  # issue 41: what the resume reclaimed, not the line a fresh start prints
            f"campaign {campaign_id} resumed: 0 task(s) already done, 1 lease(s) to reclaim from their "
            f"workers, 0 task(s) queued again (sark-node status {campaign_id})"
        )
        assert took_over in resumed.stderr, resumed.stderr
        assert f"campaign {campaign_id} running" not in resumed.stderr, resumed.stderr
        data_dir = Path(env["HOME"]) / ".local" / "share" / "sark-node"
        assert (data_dir / "campaigns.sqlite").is_file()
        assert not (data_dir / "embedded").exists()  # no embedded swarm was started
        rows = list(csv.DictReader(io.StringIO(_sark(env, tmp_path, "results", campaign_id).stdout)))
        assert [(r["Status"], r["WorkerPeerId"]) for r in rows] == [("Complete", worker.ready["peer_id"])]
        done = json.loads(_sark(env, tmp_path, "status", campaign_id, "--json").stdout)
        assert done["status"] == "finished"
    finally:
        lab.close()
