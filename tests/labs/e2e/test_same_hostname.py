"""Issue 30: a lab of identical boards with one hostname. Two real `join` workers with the same
device name (same machine: the same fingerprint) run two identical campaigns; `report --diff A B`
pairs every row by peer id (none "only in A/B"), and so does A against itself; `status` and `peers`
at 80 columns tell the two workers apart by the end of their ids; and stdout to a pipe is never
hard-wrapped: a long results path and the diff's footnotes stay on one line each."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, submitter_id, write_campaign
from kit.procs import SARK

SMALL_JOB = {"num_inference_runs": 30, "warmup_runs": 2, "load_runs": 1, "processes": 1}
BOARD = "lab-board"


def _sark(*args: str | Path, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI with stdout and stderr to pipes; COLUMNS only when given (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"COLUMNS": str(columns)} if columns else {}
    argv = [*SARK, *(str(a) for a in args)]
    return zygote.run(argv, env=env, capture_output=True, text=True, timeout=240)


def _submit(campaign: Path, gate: str, data_dir: Path, out: Path) -> tuple[str, Path]:
    """Run the campaign as README writes it; its id and the results.csv path it printed."""
    done = _sark(
        "submit", campaign, "--gate", gate, "--data-dir", data_dir, "--out", out, "--wait-peers", "2"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    campaign_id = next(line.split()[1] for line in lines if line.startswith("campaign "))
    [csv_line] = [line for line in lines if line.strip().startswith("csv:")]
    path = Path(csv_line.split("csv:", 1)[1].strip())  # the whole path on its one line
    assert path == out / campaign_id / "results.csv", done.stdout
    assert path.is_file()
    return campaign_id, path


def _diff(a: str, b: str, data_dir: Path, ids: list[str]) -> None:
    """`report --diff A B`: every row paired, one per worker, the footnotes whole on their lines."""
    rows = json.loads(_sark("report", "--diff", a, b, "--json", "--data-dir", data_dir).stdout)["rows"]
    assert [r["verdict"] for r in rows if r["verdict"].startswith("only in")] == []
    assert all(r["before_ms"] is not None and r["after_ms"] is not None for r in rows), rows
    assert sorted(r["device"] for r in rows) == sorted(f"{BOARD} [{i[-6:]}]" for i in ids)
    shown = _sark("report", "--diff", a, b, "--data-dir", data_dir)
    assert shown.returncode == 0, shown.stderr
    lines = [line.rstrip() for line in shown.stdout.splitlines()]
    assert "only in" not in shown.stdout
    for r in rows:  # each table's footnote (why a change did not count) is one line, as long as it is
        assert not r["note"] or f"{r['metric']}: {r['note']}" in lines, shown.stdout
    [summary] = [line for line in lines if "regression(s)" in line]
    assert summary.endswith("process medians apart)"), shown.stdout
    assert len(summary) > 80


def test_workers_of_one_hostname_pair_by_peer_id_and_read_apart(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        data_dir = tmp_path / "submitter"
        gate = lab.gate().ready["addrs"][0]
        board = ["--device-name", BOARD]
        workers = [
            lab.real_worker(f"w{i}", [gate], submitter_id(data_dir), wait=False, extra=board) for i in (0, 1)
        ]
        ids = [str(w.wait_event("ready", 60)["peer_id"]) for w in workers]
        campaign = write_campaign(tmp_path / "campaign.yaml", {
            "name": "boards", "model": {"path": MODEL.name},
            "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", **SMALL_JOB}],
        })  # fmt: skip
        out = tmp_path / ("results-of-the-identical-boards-lab-" * 3)  # longer than 80 columns
        a, _ = _submit(campaign, gate, data_dir, out)
        b, _ = _submit(campaign, gate, data_dir, out)

        _diff(a, b, data_dir, ids)
        _diff(a, a, data_dir, ids)  # a campaign against itself

        status = _sark("status", a, "--data-dir", data_dir, columns=80)
        assert status.returncode == 0, status.stderr
        for peer in ids:
            assert f"…{peer[-6:]}" in status.stdout, status.stdout
        peers = _sark("peers", "--gate", gate, columns=80)
        assert peers.returncode == 0, peers.stderr
        assert all(len(line) <= 80 for line in peers.stdout.splitlines()), peers.stdout
        for peer in ids:
            assert f"…{peer[-6:]}" in peers.stdout, peers.stdout
        piped = _sark("peers", "--gate", gate)  # no terminal, no COLUMNS: whole ids
        for peer in ids:
            assert peer in piped.stdout, piped.stdout
    finally:
        lab.close()
