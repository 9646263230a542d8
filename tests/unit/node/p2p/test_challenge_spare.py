"""Issue 49: a worker's CPU challenge child made ready before it is asked, and kept between challenges.

A spawn and numpy's import were most of what a challenge cost a campaign's start on a busy machine
(`benchmarks/challenge_cost.py`), so the worker keeps one child waiting (`Challenges.keep_spare`).
In-memory streams and the worker's real spawned child; no timing is asserted: each test waits for the
worker's own events and reads which child (by process id) computed each challenge, and whether it was
kept (`challenge_ended`'s `child_exit` None) or killed and reaped (-SIGKILL).
"""

from __future__ import annotations

import signal
from typing import Any

import trio

from node.p2p.wire import Channel, memory_channel_pair
from node.worker.challenge import CHILD, Challenges
from protocol import (
    ChallengeChainSeed,
    ChallengeCommit,
    ChallengeOpen,
    ChallengeReady,
    ChallengeReveal,
    ChallengeRows,
)

ROUND = {"n": 64, "steps": 2}


class Events:
    """The worker's event lines, and a wait for the next one of a kind."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._arrived = trio.Event()

    def __call__(self, event: str, /, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})
        self._arrived.set()
        self._arrived = trio.Event()

    async def until(self, kind: str, count: int = 1) -> list[dict[str, Any]]:
        while len(found := [line for line in self.lines if line["event"] == kind]) < count:
            await self._arrived.wait()
        return found


async def _spare(events: Events, count: int) -> dict[str, Any]:
    """The `count`th child that started waiting for the next challenge (its pid, kept or spawned)."""
    return (await events.until("challenge_spare", count))[count - 1]


async def _one_round(
    challenges: Challenges, nursery: trio.Nursery, seed: int
) -> tuple[ChallengeCommit, Channel]:
    """A challenge opened on the worker, one round committed; the asker's stream is returned open."""
    asker, served = memory_channel_pair("mine", "worker", read_timeout=60.0)
    nursery.start_soon(challenges.serve, served)
    await asker.send(ChallengeOpen())
    assert isinstance(await asker.receive(), ChallengeReady)
    await asker.send(ChallengeChainSeed(round=0, seed=seed, **ROUND))
    committed = await asker.receive()
    assert isinstance(committed, ChallengeCommit), committed
    return committed, asker


async def test_a_spare_child_waits_before_any_challenge_computes_it_and_is_kept_for_the_next() -> None:
    """The spare is spawned when the service starts, before anyone asks; the first challenge's
    rounds run in it, and a challenge that ends with its child idle (the asker took its rows and
    closed the stream) leaves that child waiting for the next, which computes the next challenge."""
    events = Events()
    challenges = Challenges(frozenset({"mine"}), open_mode=False, events=events)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.keep_spare)
            before = await _spare(events, 1)
            assert challenges.spare_pid == before["pid"]
            _, asker = await _one_round(challenges, nursery, seed=5)
            assert challenges.spare_pid is None  # this challenge's now
            await asker.send(ChallengeReveal(round=0, rows=(1, 2)))
            assert isinstance(await asker.receive(), ChallengeRows)
            await asker.close()
            (first,) = await events.until("challenge_ended")
            kept = await _spare(events, 2)
            _, again = await _one_round(challenges, nursery, seed=6)
            await again.close()
            await events.until("challenge_ended", 2)
            nursery.cancel_scope.cancel()
    assert (before["kept"], kept["kept"], kept["pid"]) == (False, True, before["pid"])
    assert (first["end"], first["child_exit"]) == ("the asker closed the stream", None)
    assert challenges.spare_pid is None  # stopped with the service


async def test_a_child_stopped_mid_round_is_killed_and_a_fresh_spare_follows() -> None:
    """An asker that leaves while the child computes: that child is killed and reaped, never kept;
    once no challenge has run for `spare_after_s`, a fresh child (another process) waits instead."""
    events = Events()
    challenges = Challenges(frozenset({"mine"}), open_mode=False, events=events, spare_after_s=0.2)
    asker, served = memory_channel_pair("mine", "worker", read_timeout=60.0)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(challenges.keep_spare)
            before = await _spare(events, 1)
            nursery.start_soon(challenges.serve, served)
            await asker.send(ChallengeOpen())
            assert isinstance(await asker.receive(), ChallengeReady)
            await asker.send(ChallengeChainSeed(round=0, seed=7, n=512, steps=2048))  # many seconds
            await events.until("challenge_computing")
            await asker.close()
            (ended,) = await events.until("challenge_ended")
            fresh = await _spare(events, 2)
            nursery.cancel_scope.cancel()
    assert ended["child_exit"] == -signal.SIGKILL
    assert not fresh["kept"]
    assert fresh["pid"] != before["pid"]


def test_the_child_never_reveals_the_last_challenges_rows_to_the_next() -> None:
    """A kept child forgets its last result when the next challenge begins (`warm`): a reveal asked
    before that challenge's first seed is not one of its requests, and the child ends unanswered."""
    from drivers.measuring.spawning import start_child

    child = start_child(CHILD, (), name="sark-test", duplex=True)

    def received() -> tuple[Any, ...] | None:
        assert child.receiver.poll(60), "the child did not answer within 60 s"
        return child.receive()

    try:
        while (message := received()) is not None and message[0] != "ready":
            pass  # its start message
        child.receiver.send(("warm",))
        assert received() == ("warmed",)
        child.receiver.send(("chain", 64, 1, 9))
        assert (received() or ("none",))[0] == "commit"
        child.receiver.send(("warm",))  # the next challenge
        assert received() == ("warmed",)
        child.receiver.send(("reveal", (1, 2)))
        assert received() is None  # ended: nothing revealed
    finally:
        child.stop()
