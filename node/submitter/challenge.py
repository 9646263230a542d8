"""Each new peer's claimed CPU speed challenged once per campaign, before its first task.

A campaign whose `verify:` block sets anything (`wants_challenge`) has its loop pass every discovery
round's peers through `Challenger.vouch` before the scheduler sees them (`submit`, `serve`; `plan`
too, with a key of its own): a peer that advertises a calibration, and that physics and its
class did not already refute (`claims`), is challenged over `/sark/challenge/1.0.0`
(`protocol.challenge`; the judgement is `scheduler.verification.challenge`'s): a few pings, then up
to `CHALLENGE_ROUNDS` rounds of a seed drawn from the campaign's secret, the worker's commitment
timed on this clock, rows drawn after it and checked in float64 (`drivers.challengechild`, in a
thread). The fastest round counts; the first round that bears the claim out ends it. A peer that
fails is `claim_unverified` with the challenge's figures, kept for the campaign; one that does not
answer (gone, busy, an old version) is `claim_unverified` for that round only, and challenged again
at the next. Peers on one host are challenged one after another (their products would share its
cores), hosts at once. What it costs: one spawned child and about 0.2-0.6 s of every core per
honest peer; a liar up to `SLACK` times its claim's time per round, three rounds.

Not checked here: `gpu_tflops` claims (only `claims`' physics and class checks; the same kernel
through a GPU unit is not built), and memory bandwidth.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar, final

import trio

import scheduler as sch
from node.errors import NodeError, PeerTimeout
from node.events import EventSink, quiet
from node.p2p.host import Host
from node.p2p.wire import Channel
from protocol import (
    CHALLENGE,
    CHALLENGE_PINGS,
    CHALLENGE_ROUNDS,
    ChallengeCommit,
    ChallengeFailed,
    ChallengeOpen,
    ChallengePing,
    ChallengePong,
    ChallengeReady,
    ChallengeReveal,
    ChallengeRows,
    ChallengeSeed,
    Message,
    ProtocolError,
)
from scheduler.verification import challenge

log = logging.getLogger(__name__)

OpenChallenge = Callable[[str, tuple[str, ...]], Awaitable[Channel]]
Addrs = Callable[[str], tuple[str, ...]]
START_S: Final = 30.0
"""The worker's child start (a spawn and numpy's import) on a loaded machine."""
STEP_S: Final = 10.0
"""A ping's or a reveal's answer."""
TOTAL_S: Final = 45.0
"""One peer's whole challenge (a stalling worker delays the campaign's start by at most this)."""
NOT_ANSWERED: Final = "challenge: not answered: "
_T = TypeVar("_T")


def wants_challenge(campaign: sch.Campaign) -> bool:
    """Whether the campaign's peers are challenged: its `verify:` block, or a job's, sets anything."""
    return campaign.verify != sch.Verify() or any(job.verify is not None for job in campaign.jobs)


@final
class Challenger:
    """Challenges peers as discovery finds them; keeps each answered verdict for the campaign."""

    def __init__(
        self,
        key: sch.DrawKey,
        open_challenge: OpenChallenge,
        events: EventSink = quiet,
    ) -> None:
        self._key = key
        self._open = open_challenge
        self._emit = events
        self._verdicts: dict[str, str] = {}
        """Peer id -> why its claim was refused ("": borne out), for every answered challenge."""
        self._tries: dict[str, int] = {}

    async def vouch(self, views: Sequence[sch.PeerView], addrs: Addrs) -> list[sch.PeerView]:
        """The views, each one whose challenge failed marked `claim_unverified` with why (`addrs`:
        where to dial a peer)."""
        found: dict[str, str] = {}
        by_host: dict[str, list[sch.PeerView]] = {}
        for view in views:  # relayed peers ("" host) share one queue: their hosts are unknown
            by_host.setdefault(view.host, []).append(view)
        async with trio.open_nursery() as nursery:
            for group in by_host.values():
                nursery.start_soon(self._one_by_one, group, addrs, found)
        marked = []
        for view in views:
            problem = found.get(view.peer_id, "")
            marked.append(dataclasses.replace(view, claim=(*view.claim, problem)) if problem else view)
        return marked

    async def _one_by_one(self, views: Sequence[sch.PeerView], addrs: Addrs, found: dict[str, str]) -> None:
        for view in views:
            found[view.peer_id] = await self._verdict(view, addrs(view.peer_id))

    async def _verdict(self, view: sch.PeerView, addrs: tuple[str, ...]) -> str:
        cal = view.profile.calibration
        if cal is None or view.claim:  # nothing claimed, or refused already by physics or its class
            return ""
        if view.peer_id in self._verdicts:
            return self._verdicts[view.peer_id]
        tries = self._tries[view.peer_id] = self._tries.get(view.peer_id, 0) + 1
        subject = f"{view.peer_id}\x00{tries}"
        try:
            with trio.fail_after(TOTAL_S):
                async with await self._open(view.peer_id, addrs) as channel:
                    problem = await self._challenge(channel, subject, cal.cpu_gflops)
        except (NodeError, ProtocolError, trio.TooSlowError) as exc:
            why = exc.detail if isinstance(exc, NodeError) else str(exc) or f"no verdict within {TOTAL_S:g} s"
            log.warning("peer %s: %s%s", view.peer_id, NOT_ANSWERED, why)
            return NOT_ANSWERED + why
        self._verdicts[view.peer_id] = problem
        if problem:
            log.warning("peer %s: claim_unverified: %s", view.peer_id, problem)
        return problem

    async def _challenge(self, channel: Channel, subject: str, claimed: float) -> str:
        """Why the claim is refused ("": borne out): up to `CHALLENGE_ROUNDS` rounds, the best counts."""
        await channel.send(ChallengeOpen())
        _expect(await channel.receive(timeout=START_S), ChallengeReady)
        best = 0.0
        n = 0
        for r in range(CHALLENGE_ROUNDS):
            rtt = await _fastest_ping(channel, r)
            sizing = challenge.size(claimed, rtt)
            n = sizing.n
            measured, problem = await self._round(channel, f"{subject}\x00{r}", r, sizing, claimed)
            self._emit("challenge", subject=subject.split("\x00")[0], round=r, n=n, gflops=round(measured, 3),
                       claimed=claimed, rtt_ms=round(rtt * 1e3, 3), problem=problem)  # fmt: skip
            if problem:
                return f"challenge: n={n}, {problem}"
            best = max(best, measured)
            if challenge.passes(best, claimed):
                return ""
        return challenge.reason(n, best, claimed)

    async def _round(
        self, channel: Channel, subject: str, r: int, sizing: challenge.Sizing, claimed: float
    ) -> tuple[float, str]:
        """One round: its measured GFLOPS, and why its rows do not stand ("" when they do)."""
        seed = challenge.seed_of(self._key, subject)
        sent = trio.current_time()
        await channel.send(ChallengeSeed(round=r, n=sizing.n, seed=seed))
        try:
            commit = _expect(await channel.receive(timeout=sizing.deadline_s), ChallengeCommit)
        except PeerTimeout:  # no commitment by the deadline: slower than the claim allows
            bound = challenge.gflops(sizing.n, sizing.deadline_s, sizing.credit_s)
            late = f"no commitment within {sizing.deadline_s:.3g} s: under {bound:.3g} GFLOPS"
            return bound, f"{late} against {claimed:.3g} claimed"
        elapsed = trio.current_time() - sent
        problem = challenge.commit_problem(commit.digests, sizing.n)
        if problem or commit.round != r:
            return 0.0, problem or f"a commitment for round {commit.round} in round {r}"
        rows = challenge.rows_of(self._key, subject, sizing.n)
        await channel.send(ChallengeReveal(round=r, rows=rows))
        revealed = _expect(await channel.receive(timeout=STEP_S), ChallengeRows)
        from drivers.challengechild import exact_rows  # numpy: only once a peer answered

        exact = await trio.to_thread.run_sync(exact_rows, seed, sizing.n, rows)
        measured = challenge.gflops(sizing.n, elapsed, sizing.credit_s)
        return measured, challenge.rows_problem(sizing.n, rows, revealed.rows, commit.digests, exact)


async def _fastest_ping(channel: Channel, r: int) -> float:
    """The fastest of `CHALLENGE_PINGS` round trips on the stream, in seconds."""
    fastest = float("inf")
    for k in range(CHALLENGE_PINGS):
        number = r * CHALLENGE_PINGS + k
        sent = trio.current_time()
        await channel.send(ChallengePing(round=number))
        pong = _expect(await channel.receive(timeout=STEP_S), ChallengePong)
        if pong.round != number:
            raise Unanswered(f"pong {pong.round} for ping {number}")
        fastest = min(fastest, trio.current_time() - sent)
    return fastest


class Unanswered(NodeError):
    """The worker answered a challenge frame with something else, or `challenge_failed` (`detail`)."""


def _expect(message: Message, kind: type[_T]) -> _T:
    if isinstance(message, kind):
        return message
    if isinstance(message, ChallengeFailed):
        raise Unanswered(message.reason)
    raise Unanswered(f"{message.kind} where {kind.__name__} was due")


async def open_challenge(host: Host, peer_id: str, addrs: tuple[str, ...]) -> Channel:
    """A `/sark/challenge/1.0.0` stream to the worker with the node's host."""
    return await host.open_channel(peer_id, CHALLENGE, addrs=addrs, timeout=STEP_S, read_timeout=STEP_S)


__all__ = ["Challenger", "OpenChallenge", "open_challenge", "wants_challenge"]
