"""`/sark/challenge/1.0.0` over an in-memory stream: the worker's handler with its real spawned child
against the submitter's `Challenger`, and each against a hostile peer written here.

No timing is asserted: the honest exchange claims a speed far below any machine's (a product whose
claim takes seconds), so only the frames, the checks and the verdicts are under test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

import scheduler as sch
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.challenge import Challenger
from node.worker.challenge import Challenges
from protocol import (
    Calibration,
    ChallengeCommit,
    ChallengeFailed,
    ChallengeOpen,
    ChallengePing,
    ChallengePong,
    ChallengeReady,
    ChallengeReveal,
    ChallengeRows,
    ChallengeSeed,
    ComputeUnit,
    DeviceProfile,
    RemoteProtocolError,
    UnitStatus,
)

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
) -> Callable[[str, tuple[str, ...]], Awaitable[Channel]]:
    """Hands out `channels` in turn, one per challenge stream opened (to the peer named in `opened`)."""

    async def open_challenge(peer: str, addrs: tuple[str, ...]) -> Channel:
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
        elif isinstance(asked, ChallengeSeed):
            await channel.send(ChallengeCommit(round=asked.round, digests=bytes(16 * asked.n)))
        elif isinstance(asked, ChallengeReveal):
            await channel.send(ChallengeRows(round=asked.round, rows=tuple(bytes(2048) for _ in asked.rows)))
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


async def test_a_worker_that_refuses_is_unverified_for_this_round_only() -> None:
    pairs = [memory_channel_pair("submitter", "worker") for _ in range(2)]
    opened: list[str] = []
    challenger = Challenger(KEY, _opener([s for s, _ in pairs], opened))

    async def refusing(channel: Channel) -> None:
        await channel.receive()
        await channel.send(ChallengeFailed(reason="busy: another challenge is running"))

    for _, worker in pairs:  # two discovery rounds: the refusal is not kept, so it is asked again
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(refusing, worker)
                (view,) = await challenger.vouch([_view(5.0)], lambda _: ())
        assert view.claim == ("challenge: not answered: busy: another challenge is running",)
    assert opened == ["worker", "worker"]


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
