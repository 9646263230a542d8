"""Issue 48: README's verification on one machine, as it writes it.

The line after README's `verify-command` marker runs as the console script, in a copy of examples/
with a fresh HOME: examples/verify.yaml on two embedded workers, replicated with the lab switch
(`same_host: allow`), one replica measuring at a time. It exits 0 with every row Complete and
verified "replicated 2/2 (same host)", with the count `submit` ends with: the honest workers' claimed
speed bears out its challenge (issue 49: a figure asked verified and not obtained would end the task
Unverifiable and exit 1, never 0 with an Unschedulable row). The same campaign without the switch
gets no quorum on one machine: tests/labs/e2e/test_unverifiable.py. The embedded workers are the
submitter's own (its process, its own probe's profile) and are not challenged
(`node.submitter.run.own_workers`); the rows' verification is the replicas' agreement.
"""

from __future__ import annotations

import csv
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kit.procs import SCRIPT, user_env

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _command() -> list[str]:
    lines = README.splitlines()
    at = lines.index("<!-- verify-command -->")
    assert lines[at + 1] == "```bash"
    return shlex.split(lines[at + 2])


def test_the_example_asks_for_replicas_with_the_lab_switch() -> None:
    campaign = yaml.safe_load((ROOT / "examples" / "verify.yaml").read_text())
    assert campaign["verify"] == {"replicas": 2, "same_host": "allow"}
    assert campaign["max_inflight"] == 1
    assert _command() == [".venv/bin/sark-node", "submit", "examples/verify.yaml", "--workers", "2"]


@pytest.mark.exclusive  # replicas of one class must agree within a band sized for a device measuring alone
def test_readmes_verification_command_verifies_every_row_on_one_machine(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("hub"))
    done = subprocess.run(
        [*SCRIPT, *_command()[1:]],
        cwd=tmp_path,
        env=user_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results,) = (tmp_path / "sark-results").glob("*/results.csv")
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert "verification: 2 verified, 0 unverifiable" in done.stdout
    assert [row["Status"] for row in rows] == ["Complete", "Complete"], rows
    assert [row["Verified"] for row in rows] == ["replicated 2/2 (same host)"] * 2, rows
