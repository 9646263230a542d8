"""Issue 50, scope 3, on real processes: a stranger cannot hold or burn an `--open` worker's challenge.

A gate, a real `sark-node join --open --allow ME` worker advertising a written profile that claims 2
GFLOPS (`tests/labs/e2e/test_challenge.py`'s honest claim: a fifteenth of one core of any CPU of the last
decade), and a stranger: `tests/kit/challenge_stranger.py`, a process with a key of its own speaking
`/sark/challenge/1.2.0` over the node's own host. Before the fix, a stream that opened the challenge
and only pinged held the worker's one slot for 90 s, again and again, and every honest `plan` and
`submit` read `claim_unverified: challenge: not answered: busy`; and the CPU stream computed a chain of
16,384 rows and 2,048 steps for anyone (about 10 CPU-s per 20 s in the worker's child).

In turn, each on the same worker:

1. The stranger holds the slot (ready, then pings once a second). An honest submitter the worker does
   not know (a fresh key: a stranger too, as `--open` lets it ask) runs `peers --challenge`: busy, it
   asks again within the round, and the worker closes the stranger's challenge for want of a seed
   (`SEED_S`): the honest claim is borne out.
2. The stranger holds it again; the submitter on the owner's `--allow` list asks: the stranger's
   challenge is ended at once (`CHALLENGE_PREEMPTED`) and the claim is borne out.
3. The stranger asks the CPU stream for the GPU chain's round: refused before the child computes.
4. A fourth challenge within the minute: refused by the stranger's pace.

No timing is asserted: the seconds held and each `peers` run's are printed for the record.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from kit.campaignlab import ROOT, CampaignLab, Swarm, submitter_id
from kit.procs import Proc

from labs.e2e.test_challenge import _profiles
from node.worker.challenge import SEED_S, STRANGER_EVERY_S, STRANGER_STARTS
from protocol import CHALLENGE_PREEMPTED

STRANGER = ROOT / "tests" / "kit" / "challenge_stranger.py"


def _command(stranger: Proc, line: str, answer: str) -> dict[str, Any]:
    """Tell the stranger `line`; its next `answer` event."""
    assert stranger.popen.stdin is not None
    stranger.popen.stdin.write(f"{line}\n")
    stranger.popen.stdin.flush()
    return stranger.wait_event(answer, 120)


def _verdict(swarm: Swarm, worker: str) -> tuple[str, float]:
    """`peers --challenge` run by `swarm`'s submitter: the worker's CPU verdict, and the run's seconds."""
    began = time.monotonic()
    done = swarm.run("peers", "--challenge", "--json", "--timeout", "10", timeout=240)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    (peer,) = [p for p in json.loads(done.stdout)["peers"] if p["peer_id"] == worker]
    (cpu,) = [c for c in peer["challenge"] if c["unit"] == "CPU"]
    return cpu["verdict"] if cpu["verdict"] != "not answered" else str(cpu), took


def test_a_stranger_can_neither_hold_nor_burn_an_open_workers_challenge(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "submitter")
        gate = lab.gate().ready["addrs"][0]
        honest = _profiles(tmp_path)[0]
        worker = lab.real_worker("worker", [gate], me, extra=["--open", "--profile", str(honest)])
        wid = worker.ready["peer_id"]
        argv = [sys.executable, str(STRANGER), wid, worker.ready["addrs"][0]]
        stranger = lab.start("stranger", argv, stdin=True)
        stranger.wait_event("ready", 60)
        mine = Swarm(lab, gate, {wid: worker}, tmp_path / "submitter", tmp_path)
        unknown = Swarm(lab, gate, {}, tmp_path / "unknown", tmp_path)  # a fresh key: not on the list

        _command(stranger, "hold", "holding")
        after_busy, unknown_s = _verdict(unknown, wid)
        closed = stranger.wait_event("closed", 60)
        _command(stranger, "hold", "holding")
        preempting, mine_s = _verdict(mine, wid)
        preempted = stranger.wait_event("closed", 60)
        burned = _command(stranger, "burn", "burned")
        paced = _command(stranger, "rate", "paced")
        ended = [e for e in mine.drain()[wid] if e.get("event") == "challenge_ended"]
    finally:
        lab.close()
    print(f"held {closed['held_s']} s, the unknown submitter's peers --challenge {unknown_s:.1f} s")
    print(f"held {preempted['held_s']} s until the allowed submitter came ({mine_s:.1f} s); burn {burned}")
    print(json.dumps(ended, indent=1))  # how each challenge ended, in the worker's words

    assert after_busy == "borne out", after_busy
    assert closed["reason"] == f"no seed within {SEED_S:g} s: the challenge is closed", closed
    assert preempting == "borne out", preempting
    assert preempted["reason"] == CHALLENGE_PREEMPTED, preempted
    refused = "round 0 refused: the CPU chain has at most 512 rows, not 16384"
    assert burned["answer"].startswith(refused), burned
    pace = f"rate: {STRANGER_STARTS} challenges per {STRANGER_EVERY_S:g} s for a peer not allowed"
    assert paced["answer"] == pace, paced
