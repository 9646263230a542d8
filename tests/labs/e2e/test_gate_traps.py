"""Issue 41, scope 6 (a, b): a `submit` whose gate cannot be reached, as README writes it (the console
script, `--gate ADDR`, a fresh HOME).

A closed port, or the right host with another peer's id: exit 1 with one line, and no campaign left
behind (it used to be stored first and then shown `running (submitter gone)`, which README says to
resume). The wrong id is said as what happened: "a peer answered there with another id (<its id>)",
the id in full (it was "unable to connect to 12D3Ko..." cut off).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from kit.procs import SCRIPT, Lab

ROOT = Path(__file__).resolve().parents[3]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound by us, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _user(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """README's example campaign in a folder of its own, and a new user's environment."""
    folder = tmp_path / "work"
    shutil.copytree(ROOT / "examples", folder / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))}
    return folder, {**env, "HOME": str(tmp_path / "home")}


def _sark(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCRIPT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("wrong", ["port", "peer id"])
def test_a_submit_that_reaches_no_gate_exits_1_says_why_and_leaves_nothing_to_resume(
    tmp_path: Path, wrong: str
) -> None:
    folder, env = _user(tmp_path)
    lab = Lab(tmp_path)
    try:
        gate = lab.gate().ready
        other = _sark(folder, {**env, "HOME": str(tmp_path / "other")}, "id").stdout.strip()
        host, port, gate_id = gate["addrs"][0].split("/")[2], gate["addrs"][0].split("/")[4], gate["peer_id"]
        addr = (
            f"/ip4/{host}/tcp/{_closed_port()}/p2p/{gate_id}"
            if wrong == "port"
            else f"/ip4/{host}/tcp/{port}/p2p/{other}"
        )
        done = _sark(folder, env, "submit", "examples/campaign.yaml", "--gate", addr)
        status = _sark(folder, env, "status", "--json")
    finally:
        lab.close()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: no gate answered (3 rounds): {addr}: "), line
    if wrong == "peer id":
        assert line.endswith(f"a peer answered there with another id ({gate_id})"), line
    else:
        assert line.endswith("connection refused"), line
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["campaigns"] == []  # nothing stored, nothing to resume
