"""Issues 48 and 49: README's verification on one machine, as it writes it, quiet and under a load of its own.

The line after README's `verify-command` marker runs as the console script, in a copy of examples/
with a fresh HOME: examples/verify.yaml on two embedded workers, replicated with the lab switch
(`same_host: allow`), one replica measuring at a time. It exits 0 with every row Complete and
verified "replicated 2/2 (same host)", with the count `submit` ends with. The same campaign without
the switch gets no quorum on one machine: tests/labs/e2e/test_unverifiable.py. The embedded workers
are the submitter's own (its process, its own probe's profile) and are not challenged
(`node.submitter.run.own_workers`); the rows' verification is the replicas' agreement, and the
submitter's discovery waits for its own workers however starved the process is
(`node.submitter.discovery.Discovery`'s `own`).

In the same lab, a `join` worker whose profile claims 2.5 times the CPU speed the recipe's probe
measured on this machine (its calibration, read from the fresh HOME's cache) is refused by its
challenge: its only campaign exits 1 with one line naming the rule (`claim_unverified: challenge:`).
Its margin is by design, not by this machine's weather: the line sits at the geometric midpoint
of an honest round and a 2.5x liar's best (`scheduler.verification.challenge.SLACK`), so the liar
passes only on a device 1.58x faster than its own calibration; load only makes it slower.

Quiet, on the real model, the test is `exclusive`: that a real model's replicas agree on this
machine is the point (a device measuring alone is what the class's band is sized for), and the
calibration the liar's claim is 2.5 times must be what this machine can do, not what a busy moment
let it measure. The same claim is then refused again with four processes of the test's own spinning
on one core, the liar's processes confined there with them (`kit.load.Load`'s `cores`). The claim
was once 2.5 times a calibration the recipe took at load, and a liar at load passed (2026-11-30, the
lab alone: the recipe's probe measured 16.2 GFLOPS against 139.5 quiet, so the "liar" claimed 40.5,
under half of what one core does): the recipe ran in the test's session, where Linux's autogroup
(`/proc/sys/kernel/sched_autogroup_enabled`) shares a core among sessions first and the four spinners
took four fifths of it, while the liar's worker, a session of its own as every `kit.procs` node is,
met the spinners' session as one competitor and took half (each spinner is a session of its own
since: `kit.load`).

At load the recipe runs on the paced workload (`kit.campaignlab.paced_env`: each ONNX inference of
its processes timed at `PACE_MS`, tests/kit/pacing), in its own test, not `exclusive`. Real timings
measured a minute apart on a core whose share changes do not agree, and the product says so: in CI at
b43f2c52 (and beside the suite at fb25290e) the suite's other processes, which the kernel balances
onto the lab's core too, took a changing share of it; the replicas' process medians were 35.1, 38.5,
30.5, 22.7 and 18.0 ms against 14.0-16.0 ms, one replica could not vouch for its own spread,
`disagreed`, exit 1. What the paced run pins is the rest of the recipe on a starved machine: its
embedded workers found, the replicas measured one at a time, agreeing through their processes'
medians, and the `✓2/2` verdict.

Figures of the real model at load, before
2026-11-30 (2 cores, 2026-11-26): quiet 26-29 s; at load 8 102 s
with the machine otherwise idle, 237-294 s beside other sessions' work (load 15-22). The liar's
campaign waits for its re-challenges before it ends (issue 49: a task short of a refused peer waits
for its next challenge; `--rediscover 1`, one every 3 s, up to 3): beside other sessions' work
(load 7-14) quiet 57-73 s (recipe 29 s, liar 28 s), load 8 442 s.

Beside bursty work (`kit.load.Bursts(4)`: the cores busy together in spells of 0.2-0.6 s), one
process of a replica can run inside a burst whole (process medians 1.63, 6.25, 1.56 ms): before
the bar read the processes its figure rests on (`agreement.core_spread`) that replica could not
vouch and the recipe exited 1 (1 of 4 runs); after it, 3 of 3 verified, one of them with such a
process (1.62, 4.88, 1.53 ms), 84-117 s each beside other sessions' work. Not run here (over the
few tens of seconds a lab may add): tests/unit/scheduler/verification/test_bursty_replica.py pins
the rule with those figures.

A burst longer than one process can slow most of a replica's processes: beside the suite (a
CI-equivalent at 85eb38c, 2026-11-28) one replica's three process medians were 0.942, 0.925 and 0.933
ms, the other's 1.254, 1.220 and 0.941 ms, so its figure (the median) was 31 % from its partner's
against a band of 27 % and the task `disagreed`, exit 1. examples/verify.yaml now runs five processes
a replica: a burst must slow three of them, not two of three, to move the figure, and the band the
class's error gives narrows only by sqrt(3 / 5). Beside `kit.load 3 ... bursty` (spells of work on
every core) 3 of 3 runs verified, 44-50 s each.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kit.campaignlab import MODEL, PACE_MS, CampaignLab, Swarm, paced_env, submitter_id, write_campaign
from kit.load import Load, own_core
from kit.procs import SCRIPT, probed, user_env

from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus
from scheduler.verification import challenge
from scheduler.verification.claims import MAX_GFLOPS_PER_CORE

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


def _recipe(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """README's verification command, run as written in a copy of examples/ under `root`."""
    shutil.copytree(ROOT / "examples", root / "examples", ignore=shutil.ignore_patterns("hub"))
    return subprocess.run(
        [*SCRIPT, *_command()[1:]], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def _verified(root: Path, done: subprocess.CompletedProcess[str]) -> None:
    """The recipe exited 0 with every row Complete and verified by its two replicas."""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results,) = (root / "sark-results").glob("*/results.csv")
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert "verification: 2 verified, 0 unverifiable" in done.stdout
    assert "\u27132/2" in done.stdout, done.stdout[-3000:]  # each cell says how it was verified
    assert [row["Status"] for row in rows] == ["Complete", "Complete"], rows
    assert [row["Verified"] for row in rows] == ["replicated 2/2 (same host)"] * 2, rows


def _refused(liar: subprocess.CompletedProcess[str]) -> str:
    """The liar's campaign exited 1 with one line naming the challenge; that line."""
    assert liar.returncode == 1, liar.stdout[-3000:] + liar.stderr[-3000:]
    (error,) = [line for line in liar.stderr.splitlines() if line.startswith("error:")]
    assert "refused by verification: claim_unverified: challenge: " in error, error
    assert "verification: 0 verified, 1 unverifiable" in liar.stdout, liar.stdout[-3000:]
    return error


@pytest.mark.exclusive  # the real model's replicas, and the speed this machine can do, measured alone
@pytest.mark.timeout(1200)  # a deadline on a loaded machine, not a speed
def test_readmes_verification_verifies_the_real_model_and_a_2_5x_claim_is_refused_quiet_and_loaded(
    tmp_path: Path,
) -> None:
    marks = [time.monotonic()]
    done = _recipe(tmp_path, user_env(tmp_path / "home"))
    measured = _measured(tmp_path / "home")
    _verified(tmp_path, done)
    claimed = measured * challenge.LIAR_FACTOR  # over what this machine can do, measured quiet
    marks.append(time.monotonic())
    quiet = _refused(_liar(tmp_path / "quiet", claimed))
    marks.append(time.monotonic())
    with Load(4, cores=own_core()):  # the same claim on a busy core: load only makes the liar slower
        loaded = _refused(_liar(tmp_path / "loaded", claimed))
    marks.append(time.monotonic())
    recipe_s, quiet_s, loaded_s = (b - a for a, b in itertools.pairwise(marks))
    print(f"recipe {recipe_s:.0f} s; calibration {measured:.4g} GFLOPS; liar quiet {quiet_s:.0f} s: {quiet}")
    print(f"liar at load 4 {loaded_s:.0f} s: {loaded}")  # for the record


@pytest.mark.timeout(1200)  # a deadline on a loaded machine, not a speed
def test_readmes_verification_verifies_every_row_at_load_on_a_paced_workload(tmp_path: Path) -> None:
    started = time.monotonic()
    # replicas' timings compare on a loaded machine only on a workload whose time the test sets
    with Load(
        4, cores=own_core()
    ):  # the device probed already (`kit.procs.probed`): quiet, the recipe's first start
        done = _recipe(tmp_path, paced_env(PACE_MS, probed(user_env(tmp_path / "home"))))
    print(f"load 4, paced: recipe {time.monotonic() - started:.0f} s")  # for the record
    _verified(tmp_path, done)


def _measured(home: Path) -> float:
    """The CPU speed the recipe's probe measured on this machine (its cached calibration)."""
    (cached,) = home.rglob("calibration-*.json")
    return Calibration.model_validate_json(cached.read_text()).cpu_gflops


def _liar(root: Path, claimed: float) -> subprocess.CompletedProcess[str]:
    """A `join` worker on this machine whose profile claims `claimed` GFLOPS, and a verified campaign
    that only it may run (`require.peers`): `submit`'s end."""
    root.mkdir()
    lab = CampaignLab(root / "liar", record_ttl=30.0)
    try:
        me = submitter_id(root / "liar" / "submitter")
        gate = lab.gate(timeout=120).ready["addrs"][0]
        # the cores it says, as many as its claim needs, or the physics bound refuses it before the
        # challenge is asked (a machine measuring 260 GFLOPS on 2 cores: 651 over 2 x 300)
        cores = max(os.cpu_count() or 1, math.ceil(claimed / MAX_GFLOPS_PER_CORE))
        profile = DeviceProfile(
            device_name="liar", soc="liar-cpu", cores_physical=cores, cores_logical=cores, ram_mb=1024,
            os="Linux", os_version="6", fingerprint="f" * 16,
            units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
            calibration=Calibration(cpu_gflops=claimed, mem_bandwidth_gbs=10.0, seconds=1.0),
        )  # fmt: skip
        (root / "liar.json").write_text(profile.model_dump_json())
        proc = lab.real_worker("liar", [gate], me, wait=False, extra=["--profile", str(root / "liar.json")])
        liar_id = proc.wait_event("ready", 180)["peer_id"]
        job = {"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 5, "warmup_runs": 1,
               "require": {"peers": [liar_id]}}  # fmt: skip
        verify = {"same_host": "allow"}
        body = {"name": "liar", "model": {"path": MODEL.name}, "jobs": [job], "verify": verify}
        (root / "c").mkdir()
        path = write_campaign(root / "c" / "c.yaml", body)
        swarm = Swarm(lab, gate, {}, root / "liar" / "submitter", root)
        # refused, the liar is challenged again every 3 s (3 rediscovery intervals), up to 3 times
        args = ["--wait-peers", "1", "--rediscover", "1", "--out", str(root / "out")]
        return swarm.run("submit", str(path), *args, timeout=400)
    finally:
        lab.close()
