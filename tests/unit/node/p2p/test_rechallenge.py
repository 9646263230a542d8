"""Issue 49, scope 1: a peer refused by its challenge is challenged again later in the campaign.

The submitter's `Challenger` against workers written here that compute the real chain over an
in-memory stream, on trio's virtual clock (every wait virtual, the chain and the recomputation on the
loop): a device starved for its first challenge (each commitment held past its deadline) is refused,
then passes when a discovery round finds it `RECHALLENGE_S` later with its machine free; a liar (slow
in every challenge) is asked `MOST_CHALLENGES` times and no more, refused each time; a peer borne out
is never asked again; a peer whose one slot was held by another challenge for the whole of its first
(it answers "busy") holds its job until it is asked again, `MOST_CHALLENGES` times at most. No timing
of the machine is asserted: the lateness is virtual.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import scheduler as sch
from node.errors import PeerGone
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.challenge import BUSY_PAUSES_S, MOST_CHALLENGES, RECHALLENGE_S, TOTAL_S, Challenger
from protocol import (
    CHALLENGE_BUSY,
    Calibration,
    ChallengeChainSeed,
    ChallengeCommit,
    ChallengeFailed,
    ChallengeOpen,
    ChallengePing,
    ChallengePong,
    ChallengeReady,
    ChallengeReveal,
    ChallengeRows,
    ComputeUnit,
    DeviceProfile,
    UnitStatus,
)
from scheduler.verification import challenge

KEY = sch.DrawKey(bytes(range(32)))
CLAIMED = 0.01
"""A claim any machine computes at once: only the virtual lateness decides a round."""


def _view() -> sch.PeerView:
    profile = DeviceProfile(
        device_name="w", soc="cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=CLAIMED, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    return sch.PeerView(peer_id="worker", profile=profile, host="127.0.0.1")


async def _worker(channel: Channel, late_s: float) -> None:
    """Computes the real chain each round and holds every commitment `late_s` (virtual)."""
    from drivers.measuring.challengechild import chain, digests, expand, row_bytes

    with contextlib.suppress(PeerGone):
        assert isinstance(await channel.receive(), ChallengeOpen)
        await channel.send(ChallengeReady())
        rows = None
        while True:
            asked = await channel.receive()
            if isinstance(asked, ChallengePing):
                await channel.send(ChallengePong(round=asked.round))
            elif isinstance(asked, ChallengeChainSeed):
                rows = chain(*expand(asked.seed, asked.n), asked.steps)
                await trio.sleep(late_s)
                await channel.send(ChallengeCommit(round=asked.round, digests=digests(rows)))
            elif isinstance(asked, ChallengeReveal):
                assert rows is not None
                await channel.send(ChallengeRows(round=asked.round, rows=tuple(row_bytes(rows, asked.rows))))


async def _on_the_loop(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
    from drivers.measuring.challengechild import exact_rows

    return exact_rows(seed, n, steps, rows)


async def _busy_worker(channel: Channel) -> None:
    """Another challenge holds its one slot: it answers the opening with `CHALLENGE_BUSY`."""
    with contextlib.suppress(PeerGone):
        assert isinstance(await channel.receive(), ChallengeOpen)
        await channel.send(ChallengeFailed(reason=CHALLENGE_BUSY))


def _opener(
    nursery: trio.Nursery,
    lateness: Callable[[int], float],
    opened: list[float],
    busy: Callable[[int], bool] = lambda _: False,
) -> Callable[[str, tuple[str, ...], str], Awaitable[Channel]]:
    """Each challenge stream a fresh worker, its commitments as late as `lateness(stream index)`, or
    busy where `busy(stream index)`."""

    async def open_challenge(peer: str, addrs: tuple[str, ...], protocol: str) -> Channel:
        submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=600.0)
        k = len(opened)
        nursery.start_soon(*((_busy_worker, worker) if busy(k) else (_worker, worker, lateness(k))))
        opened.append(trio.current_time())
        return submitter

    return open_challenge


async def _rounds_of_discovery(
    lateness: Callable[[int], float], rounds: int
) -> tuple[list[float], list[str]]:
    """`rounds` discovery rounds 10 s apart, each vouching for the one peer: when each challenge was
    opened, and the peer's mark after each round ("" when its claim stands)."""
    opened: list[float] = []
    marks: list[str] = []
    async with trio.open_nursery() as nursery:
        challenger = Challenger(KEY, _opener(nursery, lateness, opened), recompute=_on_the_loop)
        for _ in range(rounds):
            (view,) = await challenger.vouch([_view()], lambda _: ())
            marks.append("; ".join(view.claim))
            await trio.sleep(10.0)
        nursery.cancel_scope.cancel()
    return opened, marks


async def test_a_device_starved_at_its_first_challenge_is_challenged_again_and_passes(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    late = challenge.size(CLAIMED, 0.0).deadline_s + 1.0  # every round of the first challenge late
    opened, marks = await _rounds_of_discovery(lambda k: late if k == 0 else 0.0, rounds=8)
    assert len(opened) == 2, opened  # refused, then asked again once, and borne out for good
    assert opened[1] - opened[0] >= RECHALLENGE_S
    assert marks[0].startswith("challenge: n=64"), marks
    first_pass = next(i for i, mark in enumerate(marks) if not mark)
    assert all(marks[:first_pass]), marks
    assert not any(marks[first_pass:]), marks


@pytest.mark.trio_deadline(600)  # virtual: three refused challenges, their late rounds and the pauses
async def test_a_liar_is_asked_at_most_a_few_times_and_stays_refused(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    late = challenge.size(CLAIMED, 0.0).deadline_s + 1.0  # slow in every challenge: its device's truth
    opened, marks = await _rounds_of_discovery(lambda _: late, rounds=16)
    assert len(opened) == MOST_CHALLENGES, opened
    assert all(b - a >= RECHALLENGE_S for a, b in itertools.pairwise(opened))
    assert all(mark.startswith("challenge: n=64") for mark in marks), marks


YAML = """\
model: {url: https://example.org/m.onnx, sha256: SHA}
verify: {same_host: allow}
jobs: [{compute_unit: CPU (ONNX), devices: all, num_inference_runs: 5}]
"""


async def _campaign(
    lateness: Callable[[int], float], rounds: int, busy: Callable[[int], bool] = lambda _: False
) -> tuple[sch.Scheduler, list[object]]:
    """The challenger and the scheduler together, as the submitter's loop joins them, on trio's clock:
    `rounds` discovery rounds 10 s apart, each vouching for the one peer and handing the views to the
    scheduler (`now` trio's clock, the challenger's `wall` too); each offer committed and its result
    delivered at once. The scheduler and every command it gave."""
    from kit.scheduler_harness import MODEL, SHA

    campaign = sch.parse_campaign(YAML.replace("SHA", SHA))
    sched = sch.Scheduler("c", campaign, {"m": MODEL}, key=KEY)
    log: list[object] = []
    opened: list[float] = []
    async with trio.open_nursery() as nursery:
        challenger = Challenger(
            KEY, _opener(nursery, lateness, opened, busy), recompute=_on_the_loop, wall=trio.current_time
        )
        for _ in range(rounds):
            views = tuple(await challenger.vouch([_view()], lambda _: ()))
            out = sched.handle(sch.PeersDiscovered(peers=views), trio.current_time())
            while offers := [c for c in out if isinstance(c, sch.SendOffer)]:
                log += out
                out = []
                for o in offers:
                    now = trio.current_time()
                    out += sched.handle(sch.OfferCommitted(o.task_id, o.peer_id, "L"), now)
                    result = sch.ResultAccepted(o.task_id, "L", o.peer_id, 10.0, 0.01, "x")
                    out += sched.handle(result, now)
            log += out
            if sched.done:
                break
            await trio.sleep(10.0)
            log += sched.handle(sch.Tick(), trio.current_time())
        nursery.cancel_scope.cancel()
    return sched, log


async def test_a_task_refused_at_the_start_is_placed_once_its_peer_passes_a_later_challenge(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    late = challenge.size(CLAIMED, 0.0).deadline_s + 1.0  # the first challenge's rounds all late
    sched, log = await _campaign(lambda k: late if k == 0 else 0.0, rounds=8)
    (waited,) = [c for c in log if isinstance(c, sch.AwaitChallenge)]  # said once
    assert "waits for the next challenge of 1 peer(s)" in waited.detail, waited.detail
    (task,) = sched.tasks()
    assert task.state == sch.TaskState.DONE, task
    assert not [c for c in log if isinstance(c, sch.MarkUnschedulable)]
    assert sched.done


@pytest.mark.trio_deadline(600)  # virtual: three refused challenges, their late rounds and the pauses
async def test_refused_at_every_challenge_the_task_ends_unverifiable_after_the_last(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    late = challenge.size(CLAIMED, 0.0).deadline_s + 1.0
    started = trio.current_time()
    sched, _log = await _campaign(lambda _: late, rounds=16)
    (task,) = sched.tasks()
    assert task.state == sch.TaskState.UNVERIFIABLE, task
    assert task.detail.count("claim_unverified: challenge: n=64") == 1, task.detail
    assert "verify: {unverified: allow} places it" in task.detail, task.detail
    assert task.ended_at is not None
    assert task.ended_at - started >= (MOST_CHALLENGES - 1) * RECHALLENGE_S
    assert sched.done


TRIES = len(BUSY_PAUSES_S) + 1
"""The streams one challenge opens to a worker that answers busy until the budget runs out."""


async def test_a_task_whose_peer_was_busy_at_its_first_challenge_is_placed_when_asked_again(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    sched, log = await _campaign(lambda _: 0.0, rounds=8, busy=lambda k: k < TRIES)
    (waited,) = [c for c in log if isinstance(c, sch.AwaitChallenge)]
    assert "waits for the next challenge of 1 peer(s)" in waited.detail, waited.detail
    (task,) = sched.tasks()
    assert task.state == sch.TaskState.DONE, task
    assert not [c for c in log if isinstance(c, sch.MarkUnschedulable)]


@pytest.mark.trio_deadline(900)  # virtual: three challenges busy throughout, their pauses and rounds
async def test_a_peer_busy_at_every_challenge_holds_its_task_a_bounded_while_then_it_is_unverifiable(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    started = trio.current_time()
    sched, _log = await _campaign(lambda _: 0.0, rounds=16, busy=lambda _: True)
    (task,) = sched.tasks()
    assert task.state == sch.TaskState.UNVERIFIABLE, task
    assert f"claim_unverified: challenge: not answered: {CHALLENGE_BUSY}" in task.detail, task.detail
    assert task.ended_at is not None
    assert task.ended_at - started >= (MOST_CHALLENGES - 1) * TOTAL_S
    assert task.ended_at - started <= MOST_CHALLENGES * (RECHALLENGE_S + 2 * TOTAL_S) + 10.0
