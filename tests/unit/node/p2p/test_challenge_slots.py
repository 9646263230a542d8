"""Issue 50, scope 3: who an `--open` worker's one challenge slot serves first, and its child stopped
when the asker leaves or stops reading.

Real loopback hosts where the wire is the point (a stream reset, a host gone, a stranger and an
allowed submitter on their own keys), in-memory streams for the rules (a lockstep stream is a muxer
whose window is full: a reader that stops stalls the sender). Every child is the worker's real spawned
challenge child. No timing is asserted: each test waits for the worker's own events
(`challenge_computing`, `challenge_ended`) and reads how the challenge ended and the child's exit
code (killed: -SIGKILL, reaped before the event).
"""

from __future__ import annotations

import math
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kit.fixtures import LOOPBACK

import scheduler as sch
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.challenge import Challenger, open_challenge
from node.worker.challenge import SEND_S, Challenges
from protocol import (
    CHALLENGE,
    CHALLENGE_BUSY,
    CHALLENGE_PREEMPTED,
    Calibration,
    ChallengeChainSeed,
    ChallengeFailed,
    ChallengeOpen,
    ChallengeReady,
    ComputeUnit,
    DeviceProfile,
    UnitStatus,
)

KEY = sch.DrawKey(bytes(range(32)))
LONG_ROUND = {"n": 512, "steps": 2048}
"""The longest CPU round a worker with no claim computes (550 GFLOP: many seconds on any CPU here)."""


async def _on_the_loop(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
    """The submitter's recomputation on the event loop, where trio's virtual clock sees it take no time
    (in a thread, its wait would be idleness an autojumping clock skips, to the challenge's deadline)."""
    from drivers.measuring.challengechild import exact_rows

    return exact_rows(seed, n, steps, rows)


def _view(peer: str) -> sch.PeerView:
    """A worker claiming 0.01 GFLOPS: far below any machine, so only the frames are under test."""
    profile = DeviceProfile(
        device_name="w", soc="cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=0.01, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    return sch.PeerView(peer_id=peer, profile=profile, host="127.0.0.1")


class Events:
    """The worker's event lines, and a wait for the next one of a kind."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._arrived = trio.Event()

    def __call__(self, event: str, /, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})
        self._arrived.set()
        self._arrived = trio.Event()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == kind]

    async def until(self, kind: str, count: int = 1) -> list[dict[str, Any]]:
        while len(self.of(kind)) < count:
            await self._arrived.wait()
        return self.of(kind)


@asynccontextmanager
async def _host(tmp_path: Path, name: str) -> AsyncIterator[Host]:
    async with open_host(HostConfig(key_file=tmp_path / f"{name}.key", listen=LOOPBACK)) as host:
        yield host


async def _held(channel: Channel) -> None:
    """A stranger's challenge holding the slot with the longest round the worker computes."""
    await channel.send(ChallengeOpen())
    assert isinstance(await channel.receive(timeout=60), ChallengeReady)
    await channel.send(ChallengeChainSeed(round=0, seed=11, **LONG_ROUND))


async def test_an_allowed_peer_ends_a_strangers_challenge_and_is_served_without_waiting(
    tmp_path: Path,
) -> None:
    """Real hosts on three keys. A stranger's round holds an `--open` worker's one slot (its child
    computing the longest round the worker takes); a submitter on the worker's `--allow` list asks:
    the stranger's challenge is ended (its child killed), it is told so, and the allowed submitter's
    challenge runs on its first stream: not busy, not asked again."""
    events = Events()
    async with (
        _host(tmp_path, "worker") as worker,
        _host(tmp_path, "stranger") as stranger,
        _host(tmp_path, "mine") as mine,
    ):
        challenges = Challenges(frozenset({mine.peer_id}), open_mode=True, events=events)
        worker.set_handler(CHALLENGE, challenges.serve, deadline=math.inf)
        addrs = tuple(worker.addrs())
        opened: list[str] = []

        async def opening(peer: str, where: tuple[str, ...], protocol: str) -> Channel:
            opened.append(peer)
            return await open_challenge(mine, peer, where, protocol)

        with trio.fail_after(120):
            async with await open_challenge(stranger, worker.peer_id, addrs) as held:
                await _held(held)
                await events.until("challenge_computing")  # the stranger's child computes
                (view,) = await Challenger(KEY, opening).vouch([_view(worker.peer_id)], lambda _: addrs)
                told = await held.receive(timeout=60)
            ended = await events.until("challenge_ended", 2)
    assert view.claim == ()
    assert opened == [worker.peer_id]  # one stream: never busy behind the stranger
    assert told == ChallengeFailed(reason=CHALLENGE_PREEMPTED)
    by_peer = {line["peer"]: line for line in ended}
    assert by_peer[stranger.peer_id]["end"] == "preempted by an allowed peer"
    assert by_peer[stranger.peer_id]["child_exit"] == -signal.SIGKILL
    assert by_peer[mine.peer_id]["end"] == "the asker closed the stream"


async def test_a_stranger_waits_behind_an_allowed_peer_and_never_ends_its_challenge() -> None:
    """The converse: while an allowed peer's challenge runs, a stranger (any key) waits `ENDING_S`
    and is answered busy; the allowed challenge goes on undisturbed (its round is then computed)."""
    events = Events()
    challenges = Challenges(frozenset({"mine"}), open_mode=True, events=events)
    mine, mine_worker = memory_channel_pair("mine", "worker", read_timeout=60.0)
    stranger, stranger_worker = memory_channel_pair("stranger", "worker", read_timeout=60.0)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.serve, mine_worker)
            await mine.send(ChallengeOpen())
            assert isinstance(await mine.receive(), ChallengeReady)
            nursery.start_soon(challenges.serve, stranger_worker)
            await stranger.send(ChallengeOpen())
            refused = await stranger.receive()
            await mine.send(ChallengeChainSeed(round=0, n=64, steps=1, seed=3))
            committed = await mine.receive()
            await mine.close()
    assert refused == ChallengeFailed(reason=CHALLENGE_BUSY)
    assert committed.kind == "challenge_commit"
    (ended,) = events.of("challenge_ended")
    assert (ended["peer"], ended["end"]) == ("mine", "the asker closed the stream")


@pytest.mark.parametrize("leaves", ["resets its stream", "closes its host"])
async def test_the_child_is_killed_when_the_asker_leaves_mid_round(tmp_path: Path, leaves: str) -> None:
    """Issue 50, scope 3: a stranger's round kept computing after it stopped reading. The asker
    sends the longest round the worker takes, waits until the worker's child computes it, and
    leaves: the child is killed and reaped (before `challenge_ended` is said) with the round
    unfinished ("before the child's commit"), not left to run its many seconds."""
    events = Events()
    async with _host(tmp_path, "worker") as worker:
        worker.set_handler(CHALLENGE, Challenges(events=events).serve, deadline=math.inf)
        with trio.fail_after(120):
            async with _host(tmp_path, "asker") as asker:
                channel = await open_challenge(asker, worker.peer_id, tuple(worker.addrs()))
                await _held(channel)
                await events.until("challenge_computing")
                if leaves == "resets its stream":
                    await channel.reset()
                    await events.until("challenge_ended")
            (ended,) = await events.until("challenge_ended")
    assert ended["end"].startswith("the asker left: before the child's commit: "), ended
    assert ended["child_exit"] == -signal.SIGKILL


async def test_the_child_is_stopped_when_the_asker_stops_reading() -> None:
    """An asker that keeps its stream open and stops reading (a lockstep stream: the worker's frame
    is not taken): the commitment is not taken within `SEND_S`, so the worker ends the challenge,
    its child killed, and the slot is free for the next asker."""
    events = Events()
    challenges = Challenges(events=events)
    asker, worker = memory_channel_pair("asker", "worker", read_timeout=60.0, lockstep=True)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.serve, worker)
            await asker.send(ChallengeOpen())
            assert isinstance(await asker.receive(), ChallengeReady)
            await asker.send(ChallengeChainSeed(round=0, n=64, steps=1, seed=3))
            (ended,) = await events.until("challenge_ended")  # nothing read from here on
            nursery.cancel_scope.cancel()
        after, worker = memory_channel_pair("after", "worker", read_timeout=60.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.serve, worker)
            await after.send(ChallengeOpen())
            assert isinstance(await after.receive(), ChallengeReady)
            await after.close()
    stopped = f"the asker left: challenge_commit not taken within {SEND_S:g} s: it stopped reading"
    assert (ended["end"], ended["child_exit"]) == (stopped, -signal.SIGKILL)


async def test_a_stranger_waiting_for_the_slot_does_not_take_it_before_an_allowed_peer() -> None:
    """A stranger's round holds the slot, a second stranger waits for it (within `ENDING_S`), and an
    allowed peer asks: the first is ended for the allowed peer, and the slot it frees goes to the
    allowed peer, never to the stranger that waited longer (busy)."""
    events = Events()
    challenges = Challenges(frozenset({"mine"}), open_mode=True, events=events)
    first, first_worker = memory_channel_pair("first", "worker", read_timeout=60.0)
    second, second_worker = memory_channel_pair("second", "worker", read_timeout=60.0)
    mine, mine_worker = memory_channel_pair("mine", "worker", read_timeout=60.0)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for worker in (first_worker, second_worker, mine_worker):
                nursery.start_soon(challenges.serve, worker)
            await _held(first)
            await events.until("challenge_computing")
            await second.send(ChallengeOpen())
            await trio.testing.wait_all_tasks_blocked()  # it waits for the slot (ENDING_S)
            await mine.send(ChallengeOpen())
            answered = await mine.receive()
            told, refused = await first.receive(), await second.receive()
            await mine.close()
    assert isinstance(answered, ChallengeReady)
    assert told == ChallengeFailed(reason=CHALLENGE_PREEMPTED)
    assert refused == ChallengeFailed(reason=CHALLENGE_BUSY)


async def test_a_stranger_preempted_asks_again_like_busy(autojump_clock: trio.testing.MockClock) -> None:
    """The preempted stranger's submitter (an honest one on no list, say) asks again after the
    busy pauses, and says what the worker says next."""
    pairs = [memory_channel_pair("submitter", "worker", read_timeout=120.0) for _ in range(2)]
    opened: list[str] = []

    async def opening(peer: str, where: tuple[str, ...], protocol: str) -> Channel:
        opened.append(peer)
        return pairs[len(opened) - 1][0]

    async def answering(channel: Channel, why: str) -> None:
        await channel.receive()
        await channel.send(ChallengeFailed(reason=why))

    async with trio.open_nursery() as nursery:
        for (_, worker), why in zip(pairs, [CHALLENGE_PREEMPTED, "gone fishing"], strict=True):
            nursery.start_soon(answering, worker, why)
        challenger = Challenger(KEY, opening, recompute=_on_the_loop)
        (view,) = await challenger.vouch([_view("worker")], lambda _: ())
    assert view.claim == ("challenge: not answered: gone fishing",)
    assert opened == ["worker"] * 2


async def test_the_child_is_killed_when_the_asker_leaves_before_it_is_ready() -> None:
    """An asker that opens a challenge and closes at once (the cheapest burn: a spawn and numpy's
    import a stream): the child's start is not waited out, it is killed as the stream ends."""
    events = Events()
    asker, worker = memory_channel_pair("asker", "worker", read_timeout=60.0)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Challenges(events=events).serve, worker)
            await asker.send(ChallengeOpen())
            await asker.close()
            (ended,) = await events.until("challenge_ended")
    assert ended["end"].startswith("the asker left: before the child's ready: "), ended
    assert ended["child_exit"] == -signal.SIGKILL
