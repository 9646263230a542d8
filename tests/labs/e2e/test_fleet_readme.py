"""Issue 22, part 1: the README's fleet commands as a user types them, default flags included.

The commands are read from README.md's fleet block, the one after its `fleet-commands` marker
(`sark-node gate --listen ...`, `id`, `join --gate ... --allow ...`, `peers --gate ...`, `submit ...
--gate ...`), and each line of the block is one of them: only the placeholders are filled in (the
gate's printed address, the submitter's id from README's `sark-node id`, examples/campaign.yaml). Each
node gets its own data folder through `SARK_DATA_DIR`, so no flag is added. Workers pass no
`--listen`: they listen on the default `/ip4/0.0.0.0/tcp/0`, which py-libp2p reports as it is (P29),
and no lab elsewhere in tests/ does so.

Once on loopback (the gate's port picked free at run time: 4001 may be taken under xdist), once on
a namespace bridge (h1: gate and submitter, h2 and h4: workers, LAN addresses as on a real network).
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import ROOT
from kit.fleet import H4, FaultNet
from kit.netns import H1, H2, running
from kit.procs import SARK, Lab, Proc

README = ROOT / "README.md"
JOIN_S = 180.0
"""A README worker probes the device and calibrates before its first advert (2 cores, shared)."""


FLEET_SUBCOMMANDS = ("gate", "id", "join", "peers", "submit")
"""The block's lines, in its order: every one of them runs here."""


def fleet_block() -> list[str]:
    """The lines of README's fleet block: the ```bash fence after the `fleet-commands` marker."""
    lines = README.read_text().splitlines()
    at = lines.index("<!-- fleet-commands -->")
    assert lines[at + 1] == "```bash"
    end = lines.index("```", at + 2)
    return lines[at + 2 : end]


def readme_command(sub: str) -> list[str]:
    """The argv after `sark-node` of the fleet block's `sark-node <sub> ...` line, without its comment."""
    for line in fleet_block():
        if line.split("#", 1)[0].split()[:2] == ["sark-node", sub]:
            return shlex.split(line.split("#", 1)[0])[1:]
    raise AssertionError(f"README.md's fleet block has no `sark-node {sub} ...` line")


def test_every_line_of_readmes_fleet_block_is_a_command_run_here() -> None:
    subs = [line.split()[1] for line in fleet_block()]
    assert subs == list(FLEET_SUBCOMMANDS)


def filled(argv: list[str], **values: str) -> list[str]:
    """`argv` with the value after each `--flag` named in `values` (dashes as underscores) replaced."""
    out = list(argv)
    for flag, value in values.items():
        i = out.index("--" + flag.replace("_", "-"))
        out[i + 1] = value
    return out


class ReadmeFleet:
    """README's fleet, node by node, each a process with its own data folder (in a namespace if given)."""

    def __init__(self, lab: Lab, root: Path) -> None:
        self.lab = lab
        self.root = root
        (root / "examples" / "models").mkdir(parents=True)
        for name in ("campaign.yaml", "models/tiny-convnet.onnx"):
            shutil.copy(ROOT / "examples" / name, root / "examples" / name)

    def env(self, node: str) -> dict[str, str]:
        # Data folders under data/, not beside examples/: the lab runs `python -c`, which puts the working
        # folder first on sys.path, where a folder named `gate` would shadow the package of that name.
        return {**os.environ, "SARK_DATA_DIR": str(self.root / "data" / node), "COLUMNS": "300"}

    def gate(self, port: int | None = None, ns: str | None = None) -> list[str]:
        """Start README's gate (its port replaced when given); return the addresses it printed."""
        argv = readme_command("gate")
        if port is not None:
            argv = [a.replace("/tcp/4001", f"/tcp/{port}") for a in argv]
        proc = self.lab.start("gate", [*SARK, *argv], ns=ns, env=self.env("gate"))
        addrs: list[str] = []
        while not addrs or not addrs[-1].startswith("/ip4/127.0.0.1/"):  # loopback is ranked last
            addrs.append(proc.wait_line("/", 60))
        return addrs

    def submitter_id(self, ns: str | None = None) -> str:
        """README's `sark-node id`, in the submitter's data folder."""
        return self.run(readme_command("id"), "submitter", ns).stdout.strip()

    def join(self, name: str, gate: str, submitter: str, ns: str | None = None) -> Proc:
        """README's `join`, as it is but for the gate address and the submitter id."""
        argv = filled(readme_command("join"), gate=gate, allow=submitter)
        return self.lab.start(name, [*SARK, *argv], ns=ns, env=self.env(name))

    def run(
        self, argv: list[str], node: str, ns: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = zygote.run(
            [*SARK, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(node),
            cwd=self.root,
            netns=ns,
        )
        assert done.returncode == 0, (
            f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return done

    def peers(self, gate: str, ns: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        """README's `peers` (its table), then the same with `--json` for the addresses."""
        argv = filled(readme_command("peers"), gate=gate)
        table = self.run(argv, "peers", ns).stdout
        listed: list[dict[str, Any]] = json.loads(self.run([*argv, "--json"], "peers", ns).stdout)["peers"]
        return table, listed

    def submit(self, gate: str, ns: str | None = None) -> list[str]:
        """README's `submit` of examples/campaign.yaml; the statuses of its results.csv rows, sorted."""
        argv = filled(readme_command("submit"), gate=gate)
        argv[argv.index("campaign.yaml")] = "examples/campaign.yaml"
        self.run(argv, "submitter", ns, timeout=400)
        (results,) = (self.root / "sark-results").glob("*/results.csv")
        with results.open(newline="") as f:
            return sorted(row["Status"] for row in csv.DictReader(f))


def joined(proc: Proc) -> tuple[str, str]:
    """The peer id and reachability of a worker's `joined as <id> (<reach>); units: ...` line."""
    line = proc.wait_line("joined as ", JOIN_S)
    peer_id, reach = line.removeprefix("joined as ").split(";", 1)[0].split()
    return peer_id, reach.strip("()")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def plab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


def test_readme_fleet_commands_on_one_machine(plab: Lab, tmp_path: Path) -> None:
    fleet = ReadmeFleet(plab, tmp_path)
    gate_addrs = fleet.gate(port=_free_port())
    assert gate_addrs[-1].startswith("/ip4/127.0.0.1/"), gate_addrs  # loopback ranked last
    assert not any("/0.0.0.0/" in a for a in gate_addrs)
    gate = gate_addrs[-1]  # one machine: its loopback address (the test's traffic stays on loopback)
    me = fleet.submitter_id()
    workers = [fleet.join(f"w{i}", gate, me) for i in range(2)]
    ids = {}
    for proc in workers:
        peer_id, reach = joined(proc)
        assert reach == "direct", proc.log_excerpt()
        ids[peer_id] = proc

    table, listed = fleet.peers(gate)
    assert all(peer_id in table for peer_id in ids), table
    assert table.count("direct") == 2, table
    assert {p["peer_id"] for p in listed} == set(ids)
    for peer in listed:
        assert peer["addrs"], peer  # issue 22: "addrs": [] while "direct"
        assert not any("/0.0.0.0/" in a for a in peer["addrs"])
        assert peer["addrs"][-1].startswith("/ip4/127.0.0.1/")

    assert fleet.submit(gate) == ["Complete", "Complete", "Unschedulable"]


@pytest.fixture
def bridge() -> Iterator[FaultNet]:
    """h1, h2 and h4 on one bridge (h3 behind NAT unused); skipped where namespaces are refused."""
    yield from running(FaultNet())


@pytest.mark.netns
def test_readme_fleet_commands_on_a_namespace_bridge(bridge: FaultNet, plab: Lab, tmp_path: Path) -> None:
    fleet = ReadmeFleet(plab, tmp_path)
    gate_addrs = fleet.gate(ns=bridge.h1)  # README's own port: a namespace has its own
    assert gate_addrs[0].startswith(f"/ip4/{H1}/tcp/4001/p2p/"), gate_addrs
    gate = gate_addrs[0]
    me = fleet.submitter_id(bridge.h1)
    hosts = {
        H2: fleet.join("h2-worker", gate, me, ns=bridge.h2),
        H4: fleet.join("h4-worker", gate, me, ns=bridge.h4),
    }
    ips = {}
    for ip, proc in hosts.items():
        peer_id, reach = joined(proc)
        assert reach == "direct", proc.log_excerpt()
        ips[peer_id] = ip

    table, listed = fleet.peers(gate, bridge.h1)
    assert all(peer_id in table for peer_id in ips), table
    for peer in listed:  # the LAN address first, as the submitter on h1 dials it
        assert peer["addrs"][0].startswith(f"/ip4/{ips[peer['peer_id']]}/tcp/"), peer
        assert peer["addrs"][-1].startswith("/ip4/127.0.0.1/"), peer

    assert fleet.submit(gate, bridge.h1) == ["Complete", "Complete", "Unschedulable"]
