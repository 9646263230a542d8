"""`/sark/challenge/1.2.0` and `1.1.0` over an in-memory stream: the worker's handler with its real
spawned child against the submitter's `Challenger`, and each against a hostile peer written here;
and a worker of the CPU challenge only on real loopback hosts, asked for its GPU.

No timing is asserted: the honest exchange claims a speed far below any machine's (a product whose
claim takes seconds), so only the frames, the checks and the verdicts are under test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from kit.extras import needs

import scheduler as sch
from node.errors import PeerGone
from node.p2p.host import Host
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.challenge import BUSY_PAUSES_S, Challenger, late_wait_s, open_challenge
from node.worker.challenge import SEED_S, STRANGER_STARTS, Challenges
from protocol import (
    CHALLENGE,
    CHALLENGE_BUSY,
    CHALLENGE_PINGS,
    CHALLENGE_ROUNDS,
    CHALLENGE_UNITS,
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
    ChallengeUnitOpen,
    ComputeUnit,
    DeviceProfile,
    GpuInfo,
    RemoteProtocolError,
    UnitStatus,
)
from scheduler.verification import challenge

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

KEY = sch.DrawKey(bytes(range(32)))
UNITS = (UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),)


def _view(claimed: float) -> sch.PeerView:
    profile = DeviceProfile(
        device_name="w", soc="cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16, units=UNITS,
        calibration=Calibration(cpu_gflops=claimed, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    return sch.PeerView(peer_id="worker", profile=profile, host="127.0.0.1")


def _opener(
    channels: list[Channel], opened: list[str]
) -> Callable[[str, tuple[str, ...], str], Awaitable[Channel]]:
    """Hands out `channels` in turn, one per challenge stream opened (to the peer named in `opened`)."""

    async def open_challenge(peer: str, addrs: tuple[str, ...], protocol: str) -> Channel:
        opened.append(peer)
        return channels.pop(0)

    return open_challenge


async def test_an_honest_worker_passes_and_its_verdict_is_kept_for_the_campaign() -> None:
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=60.0)
    events: list[dict[str, object]] = []
    opened: list[str] = []

    def sink(event: str, /, **fields: object) -> None:
        events.append({"event": event, **fields})

    challenger = Challenger(KEY, _opener([submitter], opened), sink)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Challenges().serve, worker)
            (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
        (again,) = await challenger.vouch([_view(0.01)], lambda _: ())
    assert view.claim == () == again.claim
    assert opened == ["worker"]  # once per campaign
    (round_,) = events  # the first round bore the claim out
    assert (round_["n"], round_["problem"]) == (64, "")


async def _lying_worker(channel: Channel) -> None:
    """Commits zeros for every row (computing nothing), then reveals zero rows."""
    assert isinstance(await channel.receive(), ChallengeOpen)
    await channel.send(ChallengeReady())
    while True:
        asked = await channel.receive()
        if isinstance(asked, ChallengePing):
            await channel.send(ChallengePong(round=asked.round))
        elif isinstance(asked, ChallengeChainSeed):
            await channel.send(ChallengeCommit(round=asked.round, digests=bytes(16 * asked.n)))
        elif isinstance(asked, ChallengeReveal):
            await channel.send(ChallengeRows(round=asked.round, rows=tuple(bytes(1024) for _ in asked.rows)))
            return


async def test_a_worker_that_commits_to_rows_it_never_computed_is_claim_unverified() -> None:
    submitter, worker = memory_channel_pair("submitter", "worker")
    challenger = Challenger(KEY, _opener([submitter], []))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_lying_worker, worker)
            (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
    (why,) = view.claim
    assert why.startswith("challenge: n=64, row "), why
    assert why.endswith("does not match the digest committed for it"), why


async def test_a_busy_worker_is_asked_again_within_the_round_then_unverified_for_this_round_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 50, scope 3: busy (another's challenge holds the one slot) is asked again after 1, 2, 4, 8
    and 15 s (virtual time), within the challenge's budget; still busy, the claim is unverified for
    this discovery round only: the next round asks again."""
    tries = len(BUSY_PAUSES_S) + 1
    pairs = [memory_channel_pair("submitter", "worker", read_timeout=120.0) for _ in range(2 * tries)]
    opened: list[str] = []
    challenger = Challenger(KEY, _opener([s for s, _ in pairs], opened), recompute=_on_the_loop)

    async def refusing(channel: Channel) -> None:
        await channel.receive()
        await channel.send(ChallengeFailed(reason=CHALLENGE_BUSY))

    for k in range(2):  # two discovery rounds: the refusal is not kept, so it is asked again
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _, worker in pairs[k * tries : (k + 1) * tries]:
                nursery.start_soon(refusing, worker)
            (view,) = await challenger.vouch([_view(5.0)], lambda _: ())
        assert view.claim == ("challenge: not answered: busy: another challenge is running",)
        assert trio.current_time() - started == pytest.approx(sum(BUSY_PAUSES_S))
    assert opened == ["worker"] * 2 * tries


async def test_a_busy_worker_asked_again_says_what_it_says_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pairs = [memory_channel_pair("submitter", "worker", read_timeout=120.0) for _ in range(3)]
    opened: list[str] = []
    challenger = Challenger(KEY, _opener([s for s, _ in pairs], opened), recompute=_on_the_loop)
    answers = [CHALLENGE_BUSY, CHALLENGE_BUSY, "rate: 3 challenges per 60 s for a peer not allowed"]

    async def answering(channel: Channel, why: str) -> None:
        await channel.receive()
        await channel.send(ChallengeFailed(reason=why))

    async with trio.open_nursery() as nursery:
        for (_, worker), why in zip(pairs, answers, strict=True):
            nursery.start_soon(answering, worker, why)
        (view,) = await challenger.vouch([_view(5.0)], lambda _: ())
    assert view.claim == (f"challenge: not answered: {answers[-1]}",)
    assert opened == ["worker"] * 3


async def test_a_stranger_that_only_pings_gives_the_slot_back_and_an_honest_challenge_follows() -> None:
    """Issue 50, scope 3: a stream that opens the challenge and then only pings held the worker's one
    slot for 90 s (every honest challenge: busy). A seed is due `SEED_S` after ready: no seed, the
    worker says so and closes, and the honest challenge that asked meanwhile is served."""
    stranger, held = memory_channel_pair("stranger", "worker", read_timeout=60.0)
    challenges = Challenges()
    said: list[object] = []
    asked: list[str] = []

    async def pinging() -> None:
        await stranger.send(ChallengeOpen())
        assert isinstance(await stranger.receive(), ChallengeReady)
        number = 0
        while True:
            await stranger.send(ChallengePing(round=number % (CHALLENGE_ROUNDS * CHALLENGE_PINGS)))
            answer = await stranger.receive()
            if not isinstance(answer, ChallengePong):
                said.append(answer)
                return
            number += 1
            await trio.sleep(1.0)  # fewer pings than a challenge allows within the seed's window

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:

            async def opening(peer: str, addrs: tuple[str, ...], protocol: str) -> Channel:
                submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=60.0)
                nursery.start_soon(challenges.serve, worker)
                asked.append(peer)
                return submitter

            nursery.start_soon(challenges.serve, held)
            nursery.start_soon(pinging)
            await trio.sleep(1.0)  # the stranger holds the slot: the honest one asks again meanwhile
            (view,) = await Challenger(KEY, opening).vouch([_view(0.01)], lambda _: ())
    (closed,) = said
    assert isinstance(closed, ChallengeFailed)
    assert closed.reason == f"no seed within {SEED_S:g} s: the challenge is closed"
    assert view.claim == ()
    assert len(asked) > 1  # busy first, asked again


async def test_a_stranger_that_never_reveals_is_closed_too() -> None:
    """The reveal is due as soon as the commitment: a stranger that takes its round and then keeps
    the stream silent held the slot for the reveal's 30 s, three rounds over."""
    stranger, worker = memory_channel_pair("stranger", "worker", read_timeout=60.0)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Challenges().serve, worker)
            await stranger.send(ChallengeOpen())
            assert isinstance(await stranger.receive(), ChallengeReady)
            await stranger.send(ChallengeChainSeed(round=0, n=64, steps=1, seed=7))
            assert isinstance(await stranger.receive(), ChallengeCommit)
            closed = await stranger.receive()  # nothing sent: the worker speaks first
    assert isinstance(closed, ChallengeFailed)
    assert closed.reason == f"no reveal within {SEED_S:g} s: the challenge is closed"


async def test_a_stranger_starts_a_few_challenges_a_minute_a_peer_it_takes_offers_from_any() -> None:
    challenges = Challenges(frozenset({"mine"}), open_mode=True)

    async def one(peer: str) -> object:
        asker, worker = memory_channel_pair(peer, "worker", read_timeout=60.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.serve, worker)
            await asker.send(ChallengeOpen())
            answer = await asker.receive()
            await asker.close()
        return answer

    with trio.fail_after(120):
        said = [await one("stranger") for _ in range(STRANGER_STARTS + 1)]
        assert all(isinstance(a, ChallengeReady) for a in said[:-1])
        assert isinstance(said[-1], ChallengeFailed)
        assert said[-1].reason.startswith("rate: ")
        assert isinstance(await one("mine"), ChallengeReady)


async def test_the_worker_refuses_a_reveal_before_any_seed() -> None:
    submitter, worker = memory_channel_pair("submitter", "worker")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def hostile() -> None:
                await submitter.send(ChallengeOpen())
                assert isinstance(await submitter.receive(), ChallengeReady)
                await submitter.send(ChallengeReveal(round=0, rows=(1,)))

            nursery.start_soon(hostile)
            with pytest.raises(RemoteProtocolError, match="challenge_reveal out of turn"):
                await Challenges().serve(worker)


async def test_a_worker_answers_only_the_submitters_it_takes_offers_from() -> None:
    submitter, worker = memory_channel_pair("submitter", "worker")
    challenger = Challenger(KEY, _opener([submitter], []))
    guarded = Challenges(frozenset({"another-submitter"}), open_mode=False)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(guarded.serve, worker)
            (view,) = await challenger.vouch([_view(5.0)], lambda _: ())
    assert view.claim == ("challenge: not answered: not a submitter this worker takes offers from",)


def _gpu_view(claims: dict[str, float]) -> sch.PeerView:
    """A profile that lists a GPU, `GPU (PyTorch)` usable and `gpu_tflops` as given."""
    view = _view(0.01)
    units = (*UNITS, UnitStatus(unit=ComputeUnit.GPU_TORCH, usable=True, provider="CUDA"))
    cal = view.profile.calibration
    assert cal is not None
    profile = view.profile.with_(
        gpus=(GpuInfo(name="claimed", vram_mb=8192, source="torch"),),
        units=units,
        calibration=cal.with_(gpu_tflops=claims),
    )
    return dataclasses.replace(view, profile=profile)


# the GPU's chain runs through torch in the worker's child
@needs("torch")
async def test_each_gpu_claim_is_challenged_with_the_chain_on_its_device_after_the_cpu() -> None:
    """The chain runs through torch on the claimed device in the worker's real child: on `cpu` (the
    CPU's torch device) its rows are the submitter's exact recomputation and the claim (far below
    any machine's) stands; on `cuda:7`, which this torch does not see, the claim is unverified with
    the unit and the child's reason named."""
    events: list[dict[str, object]] = []

    def sink(event: str, /, **fields: object) -> None:
        events.append({"event": event, **fields})

    worker = Challenges()
    with trio.fail_after(150):
        async with trio.open_nursery() as nursery:

            async def opening(peer: str, addrs: tuple[str, ...], protocol: str) -> Channel:
                """The worker's handler starts as the stream opens, as a host's does: a stream
                made ahead would wait out its first frame's deadline behind the CPU's challenge."""
                submitter, stream = memory_channel_pair("submitter", "worker", read_timeout=60.0)
                nursery.start_soon(worker.serve if protocol == CHALLENGE else worker.serve_unit, stream)
                return submitter

            challenger = Challenger(KEY, opening, sink)
            cpu, gpu, absent = await challenger.measure(_gpu_view({"cpu": 1e-4, "cuda:7": 20.0}), ())
    assert (cpu.unit, cpu.problem, gpu.unit, gpu.problem) == ("CPU", "", "GPU (PyTorch) cpu", "")
    assert gpu.claimed_gflops == pytest.approx(0.1)
    assert gpu.measured_gflops > 0
    assert [e["unit"] for e in events] == ["CPU", "GPU (PyTorch) cpu"]
    assert (absent.unit, absent.answered) == ("GPU (PyTorch) cuda:7", False)
    assert absent.problem.startswith(
        "challenge on GPU (PyTorch) cuda:7: not answered: the challenge child: ValueError: torch"
    ), absent.problem
    assert "sees no CUDA device for cuda:7" in absent.problem


async def test_a_worker_of_the_cpu_challenge_only_leaves_a_gpu_claim_unverified(
    host_pair: tuple[Host, Host],
) -> None:
    """A worker that serves the CPU challenge only (`/sark/challenge/1.2.0`, no `1.1.0`: a build
    without the GPU's) on a real loopback host: its CPU claim is tested, its GPU claim unverified
    with the protocol named, nothing crashes."""
    submitter, old = host_pair
    old.set_handler(CHALLENGE, Challenges().serve, deadline=math.inf)
    addrs = tuple(old.addrs())
    challenger = Challenger(KEY, partial(open_challenge, submitter))
    with trio.fail_after(120):
        cpu, gpu = await challenger.measure(
            dataclasses.replace(_gpu_view({"cuda:0": 20.0}), peer_id=old.peer_id), addrs
        )
    assert (cpu.problem, cpu.answered) == ("", True)
    assert not gpu.answered
    assert gpu.problem.startswith("challenge on GPU (PyTorch) cuda:0: not answered: "), gpu.problem
    assert CHALLENGE_UNITS in gpu.problem, gpu.problem


async def test_a_worker_whose_submitter_hangs_up_before_the_commitment_ends_cleanly() -> None:
    """A claim far beyond the device: the submitter's deadline passes and it closes the stream while
    the worker's child computes (a 550 GFLOP chain here). The handler takes the hang-up as the end
    (its child stopped, nothing raised out of the race between the child and the stream)."""
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=60.0)

    async def impatient() -> None:
        await submitter.send(ChallengeOpen())
        assert isinstance(await submitter.receive(), ChallengeReady)
        await submitter.send(ChallengeChainSeed(round=0, n=512, steps=2048, seed=3))
        await submitter.close()  # as a submitter does when its deadline passes

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(impatient)
            await Challenges().serve(worker)


async def test_a_unit_with_no_challenge_kernel_is_answered_with_why() -> None:
    submitter, worker = memory_channel_pair("submitter", "worker")
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Challenges().serve_unit, worker)
            await submitter.send(ChallengeUnitOpen(unit=ComputeUnit.GPU_ONNX, device="cuda:0"))
            answer = await submitter.receive()
    assert answer == ChallengeFailed(reason="no challenge kernel for GPU (ONNX) (only GPU (PyTorch))")


async def _until_closed(worker: Coroutine[Any, Any, None]) -> None:
    """A worker written here, until the submitter closes its stream (its end of the challenge)."""
    with contextlib.suppress(PeerGone):
        await worker


async def _late_then_prompt_worker(channel: Channel, late_s: float) -> None:
    """Computes the real chain each round, but holds round 0's commitment `late_s` (past its deadline,
    within the submitter's late wait): a device busy for a moment, then free."""
    from drivers.measuring.challengechild import chain, digests, expand, row_bytes

    assert isinstance(await channel.receive(), ChallengeOpen)
    await channel.send(ChallengeReady())
    rows = None
    while True:
        asked = await channel.receive()
        if isinstance(asked, ChallengePing):
            await channel.send(ChallengePong(round=asked.round))
        elif isinstance(asked, ChallengeChainSeed):
            rows = chain(*expand(asked.seed, asked.n), asked.steps)
            if asked.round == 0:
                await trio.sleep(late_s)
            await channel.send(ChallengeCommit(round=asked.round, digests=digests(rows)))
        elif isinstance(asked, ChallengeReveal):
            assert rows is not None
            await channel.send(ChallengeRows(round=asked.round, rows=tuple(row_bytes(rows, asked.rows))))


async def _on_the_loop(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
    """The rows' recomputation on the event loop: on trio's virtual clock it takes no virtual time,
    however long the machine's load makes it for real (in a thread, its wait would be idleness the
    clock jumps over, to the challenge's own deadline)."""
    from drivers.measuring.challengechild import exact_rows

    return exact_rows(seed, n, steps, rows)


async def test_a_late_round_is_timed_and_the_next_round_may_bear_the_claim_out(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Issue 49: a round past its deadline no longer ends the challenge. Round 0 commits late (timed:
    far under the claim); round 1, after its pause, commits at once and passes. On trio's virtual
    clock: the lateness and the pauses take no real time."""
    mock_clock.autojump_threshold = 0  # all work is on the loop: idle is only waiting for a virtual deadline
    sizing = challenge.size(0.01, 0.0)
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=600.0)
    events: list[dict[str, object]] = []

    def sink(event: str, /, **fields: object) -> None:
        events.append({"event": event, **fields})

    challenger = Challenger(KEY, _opener([submitter], []), sink, recompute=_on_the_loop)
    late = sizing.deadline_s + 1.0
    assert late < late_wait_s(sizing)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_closed, _late_then_prompt_worker(worker, late))
        (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
        nursery.cancel_scope.cancel()
    assert view.claim == ()
    assert [(e["round"], e["problem"]) for e in events] == [(0, ""), (1, "")]
    assert float(events[0]["gflops"]) * challenge.SLACK < 0.01  # the late round did not bear it out


async def test_a_round_with_no_commitment_at_all_ends_the_challenge_with_a_bound(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    sizing = challenge.size(0.01, 0.0)
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=600.0)
    challenger = Challenger(KEY, _opener([submitter], []), recompute=_on_the_loop)

    async def silent(channel: Channel) -> None:
        assert isinstance(await channel.receive(), ChallengeOpen)
        await channel.send(ChallengeReady())
        while True:
            asked = await channel.receive()
            if isinstance(asked, ChallengePing):
                await channel.send(ChallengePong(round=asked.round))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_closed, silent(worker))
        (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
        nursery.cancel_scope.cancel()
    (why,) = view.claim
    assert why.startswith(f"challenge: n=64, no commitment within {late_wait_s(sizing):.3g} s: under "), why


@pytest.mark.parametrize(
    ("n", "steps", "why"),
    [
        (16384, 2048, "round 0 refused: the CPU chain has at most 512 rows, not 16384"),
        (512, 2048, "round 0 refused: 2048 steps of 512 rows is more than 4 s of this worker's claim"),
    ],
)
async def test_a_worker_refuses_a_cpu_round_past_its_chain_or_its_own_claim(
    n: int, steps: int, why: str
) -> None:
    """Issue 50, scope 3: a stranger that asks the CPU stream for the GPU chain's rows, or for minutes
    of work against a worker claiming 1 GFLOPS, is answered `challenge_failed` before the child
    computes anything, and the worker is free again."""
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=60.0)
    challenges = Challenges(claimed_gflops=1.0)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.serve, worker)
            await submitter.send(ChallengeOpen())
            assert isinstance(await submitter.receive(), ChallengeReady)
            await submitter.send(ChallengeChainSeed(round=0, n=n, steps=steps, seed=1))
            refused = await submitter.receive()
    assert isinstance(refused, ChallengeFailed)
    assert refused.reason.startswith(why), refused.reason


async def test_the_next_seed_does_not_wait_for_the_rows_recomputation(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Issue 50's worker closes a challenge whose next seed is not in within 5 s of its rows; the rows'
    recomputation (seconds for a large claim on a busy machine) runs beside the next round instead of
    before it, and the verdict waits for both. Here it takes 8 virtual seconds a round: round 1's seed
    still follows round 0's rows within the pause and the pings, and the claim is borne out only once
    both rounds' rows were checked."""
    mock_clock.autojump_threshold = 0
    sizing = challenge.size(0.01, 0.0)
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=600.0)
    checked: list[float] = []

    async def slow(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
        await trio.sleep(8.0)
        checked.append(trio.current_time())
        return await _on_the_loop(seed, n, steps, rows)

    gaps: list[float] = []

    async def timed_worker(channel: Channel) -> None:
        answered = 0.0
        seen = 0
        original = channel.receive

        async def receive(timeout: float | None = None) -> Any:
            nonlocal seen
            asked = await original(timeout=timeout)
            if isinstance(asked, ChallengeChainSeed) and seen:
                gaps.append(trio.current_time() - answered)
            seen += isinstance(asked, ChallengeChainSeed)
            return asked

        sent = channel.send

        async def send(message: Any) -> None:
            nonlocal answered
            await sent(message)
            if isinstance(message, ChallengeRows):
                answered = trio.current_time()

        channel.receive, channel.send = receive, send  # type: ignore[method-assign]
        await _late_then_prompt_worker(channel, sizing.deadline_s + 1.0)

    challenger = Challenger(KEY, _opener([submitter], []), recompute=slow)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_closed, timed_worker(worker))
        (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
        nursery.cancel_scope.cancel()
    assert view.claim == ()
    assert len(gaps) == 1
    assert gaps[0] < 5.0, gaps  # the pause before round 1 and its pings, not the 8 s recomputation
    assert len(checked) == 2  # both rounds' rows recomputed before the verdict


async def test_round_zeros_rows_are_recomputed_while_the_worker_starts_and_the_verdict_does_not_wait(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Issue 49 (what a challenge costs a campaign's start): the submitter knows round 0's seed and
    rows before it sends anything (both are drawn from its secret), so it recomputes them while the
    worker's child warms up and the pings run; a peer that bears its claim out in round 0 is then not
    kept waiting for its rows. Here the child takes 10 virtual seconds to say ready and the
    recomputation 8: the verdict comes at 10 s, not 18, from one recomputation, begun before the
    seed was sent. The rows are still named only after the commitment."""
    mock_clock.autojump_threshold = 0
    submitter, worker = memory_channel_pair("submitter", "worker", read_timeout=600.0)
    began: list[float] = []
    seeded: list[float] = []
    named: list[float] = []

    async def slow(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
        began.append(trio.current_time())
        await trio.sleep(8.0)
        return await _on_the_loop(seed, n, steps, rows)

    async def slow_to_start(channel: Channel) -> None:
        from drivers.measuring.challengechild import chain, digests, expand, row_bytes

        assert isinstance(await channel.receive(), ChallengeOpen)
        await trio.sleep(10.0)  # the child's warm-up
        await channel.send(ChallengeReady())
        rows = None
        while True:
            asked = await channel.receive()
            if isinstance(asked, ChallengePing):
                await channel.send(ChallengePong(round=asked.round))
            elif isinstance(asked, ChallengeChainSeed):
                seeded.append(trio.current_time())
                rows = chain(*expand(asked.seed, asked.n), asked.steps)
                await channel.send(ChallengeCommit(round=asked.round, digests=digests(rows)))
            elif isinstance(asked, ChallengeReveal):
                assert rows is not None
                named.append(trio.current_time())
                await channel.send(ChallengeRows(round=asked.round, rows=tuple(row_bytes(rows, asked.rows))))

    challenger = Challenger(KEY, _opener([submitter], []), recompute=slow)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_closed, slow_to_start(worker))
        (view,) = await challenger.vouch([_view(0.01)], lambda _: ())
        took = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert view.claim == ()
    assert len(began) == 1  # round 0's, begun ahead and used
    assert began[0] < seeded[0] <= named[0]
    assert took < 10.0 + 8.0, took  # the recomputation ran beside the warm-up, not after the rows
