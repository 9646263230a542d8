"""Issue 30: gate addresses are checked up front, and a gate that does not answer is one line.

Every command taking `--gate` (join, submit, plan, peers, serve), run as README writes it: a bad
multiaddr, or a gate address without `/p2p/<id>`, is exit 2 with one line naming `--gate`, before
anything starts (it used to be three WARNING lines, then exit 1 after 4.5 s); a gate where nothing
listens is exit 1 with one line naming the gate and the cause (it used to be three ~300-character
warnings before it).
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from kit import zygote
from kit.campaignlab import MODEL, submitter_id, write_campaign
from kit.procs import SARK

STRANGER = "12D3KooWGzh9Yd6Nq4A7m8L7nbiFfXdbKsaBdSiQdFzURtHjnDdk"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(name: str, gate: str, tmp_path: Path) -> list[str]:
    """The README line of each command, with this gate and a data folder of the test's own."""
    campaign = tmp_path / "c.yaml"
    if not campaign.exists():
        write_campaign(campaign, {"model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)"}]})
    data = ["--data-dir", str(tmp_path / "node")]
    return {
        "join": [*SARK, "join", "--gate", gate, "--allow", submitter_id(tmp_path / "me"), *data],
        "submit": [*SARK, "submit", str(campaign), "--gate", gate, *data],
        "plan": [*SARK, "plan", str(campaign), "--gate", gate, *data],
        "peers": [*SARK, "peers", "--gate", gate, *data],
        "serve": [*SARK, "serve", "--gate", gate, *data],
    }[name]


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return zygote.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


BAD = {
    "no-p2p": ("/ip4/127.0.0.1/tcp/4001", "no /p2p/<peer id>"),
    "bad-port": ("/ip4/127.0.0.1/tcp/40x1/p2p/" + STRANGER, "not a valid multiaddr"),
    "bad-id": ("/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWnotanid", "not a valid multiaddr"),
    "host-port": ("127.0.0.1:4001", "not a valid multiaddr"),
    "newline": ("/ip4/127.0.0.1/tcp/4001/p2p/" + STRANGER + "\n", "control character"),
}
CASES = [
    *(("join", form) for form in BAD),  # every form once, then every other command
    *((command, form) for command in ("submit", "plan", "peers", "serve") for form in ("no-p2p", "newline")),
]


@pytest.mark.parametrize(("command", "form"), CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_a_bad_gate_address_is_exit_2_in_one_line(command: str, form: str, tmp_path: Path) -> None:
    gate, words = BAD[form]
    done = _run(_command(command, gate, tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: --gate: "), lines[0]
    assert words in lines[0], lines[0]
    assert not (tmp_path / "node").exists()  # refused before anything started


@pytest.mark.parametrize("command", ["submit", "plan", "peers", "serve"])
def test_a_gate_where_nothing_listens_is_one_line(command: str, tmp_path: Path) -> None:
    gate = f"/ip4/127.0.0.1/tcp/{_free_port()}/p2p/{STRANGER}"
    done = _run(_command(command, gate, tmp_path))
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: no gate answered (3 rounds): {gate}: connection refused"], done.stderr
