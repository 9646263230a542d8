"""Each new peer's claimed CPU speed challenged once per campaign, before its first task.

A campaign whose `verify:` block sets anything (`wants_challenge`) has its loop pass every discovery
round's peers through `Challenger.vouch` before the scheduler sees them (`submit`, `serve`; `plan`
too, with a key of its own): a peer that advertises a calibration, and that physics and its
class did not already refute (`claims`), is challenged over `/sark/challenge/1.2.0`
(`protocol.challenge`; the judgement is `scheduler.verification.challenge`'s): a few pings, then up
to `CHALLENGE_ROUNDS` rounds of a seed drawn from the campaign's secret, the worker's commitment to
its chain timed on this clock, rows drawn after it and recomputed in float64
(`drivers.measuring.challengechild`, in a thread, beside the rounds that follow, so that the next seed
is never late for the worker's window). The fastest round counts; the first round that
bears the claim out ends it; every round is tried before a refusal, spread over time
(`ROUND_GAP_S`), and a commitment that comes after its deadline is timed and counts
(`late_wait_s`), so that a device disturbed for a moment is not refused for the campaign. A peer
that fails is `claim_unverified` with the challenge's figures until a discovery round finds it
`rechallenge_s` later (`RECHALLENGE_ROUNDS` rediscovery intervals): then it is challenged again, up
to `MOST_CHALLENGES` times a campaign, and the last verdict stands (a device starved by other work
when first asked passes once its machine is less busy). The cheater's view: a liar refused is asked
again, but each challenge holds it by the same margin (`scheduler.verification.challenge`: a 2.5x
claim needs a round 1.58x faster than its device can compute), which no timing of its own can buy,
so more tries buy it nothing it can choose; nothing it reports (its load, its busy spell) moves the
bound or the pause. The peers the scheduler already placed work on stay placed; a refused view
carries when its next verdict is due (`again_by`, on the scheduler's clock), and a verified job
short of such peers waits for it (`scheduler.state.placement.open_refusals`): placed when a
re-challenge passes, `Unverifiable` once the last is used or its due time passed. One that does
not answer (gone, busy, an older version that serves only 1.0.0's single product) is
`claim_unverified` for that round only, and challenged again at the next; a job short of a peer that
said it was busy until the budget ran out (another challenge held its one slot) waits for that next
challenge, as for a refused one's (`again_by`), `MOST_CHALLENGES` times at most. Peers on one host are
challenged one after another (their chains would share its cores), hosts at once.
What it costs: the worker's child, spawned with its daemon before anyone asks and kept between
challenges (`node.worker.challenge`), and about 0.2-0.6 s of every core per honest peer; round 0's
rows are recomputed here while the worker's child warms up (`Challenger._ahead`), so a peer that
passes in round 0 waits for no recomputation; a liar up to `LATE_FACTOR` times its round's deadline
per round, three rounds, with the pauses between them (`benchmarks/challenge_cost.py`).

This submitter's own embedded workers (`submit --workers N`, in its process, its own probe's profile)
are not challenged: they claim what the submitter measured itself (`node.submitter.run.own_workers`).

A profile's `gpu_tflops` claims (`targets`) are challenged next, each on its own
`/sark/challenge/1.1.0` stream with the chain (`protocol.challenge`) on the named device through
`GPU (PyTorch)`; a GPU claim on a profile that lists no usable `GPU (PyTorch)` is refused as such,
and a worker that cannot run the chain (an older version, no CUDA in its torch, busy) leaves the
claim unverified for that round with why. `measure` runs every claim and returns each figure
(`peers --challenge`). Not checked here: memory bandwidth, and a GPU's claim through ONNX Runtime
alone (the chain runs through torch only).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar, final

import trio

import scheduler as sch
from node.errors import NodeError, PeerTimeout
from node.events import EventSink, quiet
from node.p2p.host import Host
from node.p2p.wire import Channel
from protocol import (
    CHALLENGE,
    CHALLENGE_BUSY,
    CHALLENGE_PINGS,
    CHALLENGE_PREEMPTED,
    CHALLENGE_ROUNDS,
    CHALLENGE_UNITS,
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
    Message,
    ProtocolError,
)
from scheduler.verification import challenge

log = logging.getLogger(__name__)

OpenChallenge = Callable[[str, tuple[str, ...], str], Awaitable[Channel]]
"""Opens a challenge stream: (peer id, its addresses, the protocol: `CHALLENGE` or `CHALLENGE_UNITS`)."""
Addrs = Callable[[str], tuple[str, ...]]
START_S: Final = 30.0
"""The worker's child start (a spawn and numpy's import, or torch's and a CUDA context), loaded."""
STEP_S: Final = 10.0
"""A ping's or a reveal's answer."""
TOTAL_S: Final = 45.0
"""One unit's whole challenge (a stalling worker delays the campaign's start by at most this)."""
NOT_ANSWERED: Final = "not answered: "
BUSY_PAUSES_S: Final = (1.0, 2.0, 4.0, 8.0, 15.0)
"""Pauses before asking a busy worker again (`CHALLENGE_BUSY`: another submitter's challenge holds its
one slot, at most a few rounds since a slot is given back within seconds of silence; or
`CHALLENGE_PREEMPTED`: a peer the worker takes offers from came first), within `TOTAL_S`: a
stranger's challenge delays an honest one, it does not deny it."""
ROUND_GAP_S: Final = 0.5
"""The pause before round r is r times this: rounds spread over a second and a half, so that one
busy moment on the device (another process's burst) does not decide every round."""
RECHALLENGE_ROUNDS: Final = 3
"""A peer refused by its challenge is challenged again at the first discovery round this many
rediscovery intervals after (`rechallenge_s`: another process's busy spell on its machine may have
passed)."""
RECHALLENGE_S: Final = 30.0
"""The wait before a refused peer's next challenge at the default rediscovery interval (10 s)."""
MOST_CHALLENGES: Final = 3
"""Challenges a peer gets in a campaign, its first included; the last one's verdict stands."""
LATE_FACTOR: Final = 3.0
"""A commitment is awaited this many times the round's deadline: a late one is timed and counts as a
round that did not bear the claim out (the next round is tried); only none at all ends the challenge
(the stream cannot go on while the worker's child computes)."""


def rechallenge_s(interval_s: float) -> float:
    """The wait before a refused peer's next challenge, for a rediscovery interval of `interval_s`
    (the submitter's own `--rediscover`): `RECHALLENGE_ROUNDS` of them."""
    return RECHALLENGE_ROUNDS * interval_s


def late_wait_s(sizing: challenge.Sizing) -> float:
    """How long a round's commitment is awaited (a claim 8x the truth, the lab's liar, commits within)."""
    return LATE_FACTOR * sizing.deadline_s


_T = TypeVar("_T")


def wants_challenge(campaign: sch.Campaign) -> bool:
    """Whether the campaign's peers are challenged: its `verify:` block, or a job's, sets anything."""
    return campaign.verify != sch.Verify() or any(job.verify is not None for job in campaign.jobs)


@dataclass(frozen=True)
class Target:
    """One claim a challenge tests: the CPU's `cpu_claim` (`cpu_gflops` or its fp32 peak, the larger;
    `unit` None) or a GPU's `gpu_tflops[device]`."""

    unit: ComputeUnit | None
    device: str
    claimed_gflops: float

    @property
    def name(self) -> str:
        """ "CPU", or the unit and its device ("GPU (PyTorch) cuda:0")."""
        return "CPU" if self.unit is None else f"{self.unit.value} {self.device}"

    @property
    def label(self) -> str:
        """How its reasons begin (`challenge.label`)."""
        return challenge.label(self.unit, self.device)


def targets(profile: DeviceProfile) -> list[Target | challenge.Measured]:
    """The claims a challenge tests, the CPU's first; a GPU claim with no unit to run the chain
    through is already a `Measured` refusal."""
    cal = profile.calibration
    if cal is None:
        return []
    unit = challenge.gpu_unit(profile)
    found: list[Target | challenge.Measured] = [Target(None, "", cal.cpu_claim)]
    for device, claimed in challenge.gpu_claims(profile):
        found.append(
            Target(unit, device, claimed)
            if unit is not None
            else challenge.Measured(f"GPU {device}", claimed, 0.0, challenge.no_gpu_kernel(device))
        )
    return found


@final
class Challenger:
    """Challenges peers as discovery finds them; keeps each answered verdict for the campaign."""

    def __init__(
        self,
        key: sch.DrawKey,
        open_challenge: OpenChallenge,
        events: EventSink = quiet,
        recompute: Recompute | None = None,
        own: frozenset[str] = frozenset(),
        again_s: float = RECHALLENGE_S,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`own`: the peer ids of this submitter's own embedded workers, never challenged
        (`node.submitter.run.own_workers` says why); `again_s`: the wait before a refused peer's next
        challenge (`rechallenge_s`); `wall`: the scheduler's clock (`PeerView.challenge_again_by`)."""
        self._own = own
        self._again_s = again_s
        self._wall = wall
        self._key = key
        self._open = open_challenge
        self._emit = events
        self._recompute = recompute or _in_thread
        self._verdicts: dict[str, str] = {}
        """Peer id -> why its claim was refused ("": borne out), for every answered challenge."""
        self._answered: dict[str, tuple[int, float]] = {}
        """Peer id -> its answered challenges so far, and when the last one ended (trio's clock)."""
        self._busy: dict[str, tuple[int, float]] = {}
        """Peer id -> its challenges that went unanswered because it was busy throughout (it said so),
        and when the last one ended (trio's clock): it is asked again at the next discovery round."""
        self._evidence: dict[str, tuple[str, ...]] = {}
        """Peer id -> what its answered challenges measured, one line a unit (`evidence_line`)."""
        self._tries: dict[str, int] = {}
        self._exact: dict[tuple[int, int, int, tuple[int, ...]], _Exact] = {}
        """Recomputations begun ahead (`_ahead`), by (seed, n, steps, rows), until a round asks for them."""

    async def vouch(self, views: Sequence[sch.PeerView], addrs: Addrs) -> list[sch.PeerView]:
        """The views, each one whose challenge failed marked `claim_unverified` with why (`addrs`:
        where to dial a peer)."""
        found: dict[str, str] = {}

        async def verdict(view: sch.PeerView) -> None:
            found[view.peer_id] = await self._verdict(view, addrs(view.peer_id))

        await by_host(views, verdict)
        marked = []
        for view in views:
            problem = found.get(view.peer_id, "")
            view = dataclasses.replace(view, challenged=self._evidence.get(view.peer_id, view.challenged))
            if problem:
                again = self.again_by(view.peer_id)
                view = dataclasses.replace(view, claim=(*view.claim, problem), challenge_again_by=again)
            marked.append(view)
        return marked

    def again_by(self, peer_id: str) -> float:
        """When (the scheduler's clock, `wall`) a refused peer's next challenge will have its verdict
        at the latest, or 0 when none will come (borne out, gone, or its last challenge used): a
        refused peer's next challenge waits `again_s` and then a discovery round (at most another
        `again_s`), and takes at most `TOTAL_S` a claim; a peer that said it was busy until the last
        challenge's budget ran out (another challenge held its one slot) is asked again at the next
        discovery round, `MOST_CHALLENGES` times at most: a device on a busy machine is not refused
        for the whole campaign because its slot was taken when first asked. A job short of the peer
        waits until then (`scheduler.state.placement.open_refusals`); a peer gone meanwhile holds it
        no longer. The time is read from this submitter's clock and constants only. The cheater's
        view: a peer chooses whether it says "busy", and saying so holds a job that has no other peer
        for at most `MOST_CHALLENGES` rounds of `again_s` and `TOTAL_S`, then the job ends
        `Unverifiable`; it is placed only once a challenge bears its claim out, so waiting buys it
        nothing."""
        verdict = self._verdicts.get(peer_id)  # None: never answered; "": borne out
        answered, at = self._answered.get(peer_id, (0, 0.0))
        busy, busy_at = self._busy.get(peer_id, (0, 0.0))
        if verdict == "" or answered >= MOST_CHALLENGES or busy >= MOST_CHALLENGES:
            return 0.0
        due = at + 2 * self._again_s + 2 * TOTAL_S if verdict else 0.0  # a CPU and a GPU claim, at most
        if busy and busy_at > at:  # its last challenge found it busy: asked again at the next round
            due = max(due, busy_at + self._again_s + 2 * TOTAL_S)
        if not due:
            return 0.0
        return self._wall() + max(0.0, due - trio.current_time())

    async def measure(
        self, view: sch.PeerView, addrs: tuple[str, ...], *, first_problem: bool = False
    ) -> tuple[challenge.Measured, ...]:
        """Each claim of the peer's profile challenged (`targets`), in order; `first_problem`: stop at
        the first claim refused or unanswered."""
        measured: list[challenge.Measured] = []
        for target in targets(view.profile):
            one = target if isinstance(target, challenge.Measured) else await self._one(view, target, addrs)
            measured.append(one)
            if first_problem and one.problem:
                break
        return tuple(measured)

    async def _verdict(self, view: sch.PeerView, addrs: tuple[str, ...]) -> str:
        if view.profile.calibration is None or view.claim or view.peer_id in self._own:
            return ""  # nothing claimed, refused already, or this submitter's own measurement
        if view.peer_id in self._verdicts and not self._again(view.peer_id):
            return self._verdicts[view.peer_id]
        measured = await self.measure(view, addrs, first_problem=True)
        problem = next((m.problem for m in measured if m.problem), "")
        if all(m.answered for m in measured):
            count, _ = self._answered.get(view.peer_id, (0, 0.0))
            self._answered[view.peer_id] = count + 1, trio.current_time()
            self._verdicts[view.peer_id] = problem
            self._evidence[view.peer_id] = tuple(evidence_line(m) for m in measured)
        elif any(m.busy for m in measured):
            count, _ = self._busy.get(view.peer_id, (0, 0.0))
            self._busy[view.peer_id] = count + 1, trio.current_time()
        else:  # gone, or an older version: no verdict is coming that a job could wait for
            self._busy[view.peer_id] = MOST_CHALLENGES, trio.current_time()
        if problem:  # said where it matters: the task's reasons and the plan; a log line for operators
            log.info("peer %s: claim_unverified: %s", view.peer_id, problem)
        return problem

    def _again(self, peer_id: str) -> bool:
        """Whether a refused peer is challenged again now: `again_s` after its last challenge,
        while it has had fewer than `MOST_CHALLENGES` (a peer borne out is never asked again)."""
        count, at = self._answered.get(peer_id, (MOST_CHALLENGES, 0.0))
        refused = bool(self._verdicts.get(peer_id))
        return refused and count < MOST_CHALLENGES and trio.current_time() - at >= self._again_s

    async def _one(self, view: sch.PeerView, target: Target, addrs: tuple[str, ...]) -> challenge.Measured:
        """One claim challenged over its own stream, or why it went unanswered."""
        key = view.peer_id if target.unit is None else f"{view.peer_id}\x00{target.device}"
        protocol = CHALLENGE if target.unit is None else CHALLENGE_UNITS
        busy: Unanswered | None = None
        try:
            with trio.fail_after(TOTAL_S):
                for pause in (*BUSY_PAUSES_S, None):  # a busy worker is asked again within the budget
                    tries = self._tries[key] = self._tries.get(key, 0) + 1
                    try:
                        async with await self._open(view.peer_id, addrs, protocol) as channel:
                            return await self._challenge(channel, f"{key}\x00{tries}", target)
                    except Unanswered as exc:
                        if exc.detail not in (CHALLENGE_BUSY, CHALLENGE_PREEMPTED):
                            raise
                        busy = exc
                        if pause is None:
                            raise
                    await trio.sleep(pause)
                raise AssertionError("unreachable: the last try raises or returns")
        except (NodeError, ProtocolError, trio.TooSlowError) as exc:
            if isinstance(exc, trio.TooSlowError) and busy is not None:
                exc = busy  # still busy when the budget ran out
            why = exc.detail if isinstance(exc, NodeError) else str(exc) or f"no verdict within {TOTAL_S:g} s"
            return challenge.Measured(
                target.name,
                target.claimed_gflops,
                0.0,
                f"{target.label}: {NOT_ANSWERED}{why}",
                answered=False,
                busy=exc is busy,  # busy at its last try, or when the budget ran out
            )

    async def _challenge(self, channel: Channel, subject: str, target: Target) -> challenge.Measured:
        """Up to `CHALLENGE_ROUNDS` rounds (the best counts), and why the claim is refused.

        Each round's drawn rows are recomputed beside the rounds that follow (`_Rows`), and the
        verdict waits for every one: the worker closes a challenge whose next seed does not come
        within its window (`node.worker.challenge.SEED_S`), and a recomputation in line, seconds for
        a large claim on a busy machine, ended a liar's challenge as unanswered before its figure
        was read. A round whose rows do not stand refuses the claim whatever the other rounds showed.
        """
        checks: list[_Rows] = []
        ahead = self._ahead(subject, target) if target.unit is None else None
        try:
            async with trio.open_nursery() as nursery:
                if ahead is not None:
                    nursery.start_soon(ahead.run, self._recompute)
                if target.unit is None:
                    await channel.send(ChallengeOpen())
                else:
                    await channel.send(ChallengeUnitOpen(unit=target.unit, device=target.device))
                _expect(await channel.receive(timeout=START_S), ChallengeReady)
                measured = await self._rounds(channel, subject, target, checks, nursery)
        except BaseExceptionGroup as group:  # one failure (busy, a peer gone) is raised as itself
            raise _alone(group) from None
        finally:
            if ahead is not None:  # not asked for: round 0 was of another size, or never came
                self._exact.pop(ahead.key, None)
        wrong = next((c for c in checks if c.problem), None)
        if wrong is not None:  # rows that do not stand: refused, whatever the figure
            why = f"{target.label}: {wrong.shape}, {wrong.problem}"
            return challenge.Measured(target.name, target.claimed_gflops, measured.measured_gflops, why)
        return measured

    def _ahead(self, subject: str, target: Target) -> _Exact:
        """A CPU claim's round 0 drawn rows, recomputed from now (beside the worker's start and the
        pings), for the round's size over a round trip short enough not to change it (any LAN's):
        most honest peers pass in round 0, and their verdict then waits for no recomputation (16 rows
        of the CPU chain: milliseconds on one core; a GPU chain's take seconds, and are recomputed
        only once a commitment came). The rows are named to the worker only after its commitment, as
        ever: computing them early shows it nothing."""
        first = f"{subject}\x00{0}"
        sizing = challenge.size(target.claimed_gflops, 0.0)
        key = (challenge.seed_of(self._key, first), sizing.n, sizing.steps)
        exact = _Exact((*key, challenge.rows_of(self._key, first, sizing.n)))
        self._exact[exact.key] = exact
        return exact

    async def _recomputed(self, seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
        """The rows' recomputation: the one begun ahead when it is of these rows, else begun now."""
        ahead = self._exact.pop((seed, n, steps, rows), None)
        if ahead is not None:
            await ahead.done.wait()
            if ahead.rows is not None:
                return ahead.rows
        return await self._recompute(seed, n, steps, rows)

    async def _rounds(
        self,
        channel: Channel,
        subject: str,
        target: Target,
        checks: list[_Rows],
        nursery: trio.Nursery,
    ) -> challenge.Measured:
        """The rounds until the claim is borne out, a round fails, or none is left; each round's rows
        handed to `nursery` to recompute (into `checks`)."""
        claimed, best = target.claimed_gflops, 0.0
        sizing = challenge.size(claimed, 0.0)
        for r in range(CHALLENGE_ROUNDS):
            if r:  # every round is tried before a verdict, spread over time: a busy moment passes
                await trio.sleep(ROUND_GAP_S * r)
            rtt = await _fastest_ping(channel, r)
            sizing = (challenge.size if target.unit is None else challenge.size_chain)(claimed, rtt)
            measured, problem, late, rows = await self._round(channel, f"{subject}\x00{r}", r, sizing, target)
            self._emit("challenge", subject=subject.split("\x00")[0], unit=target.name, round=r, n=sizing.n,
                       steps=sizing.steps, gflops=round(measured, 3), claimed=claimed,
                       rtt_ms=round(rtt * 1e3, 3), problem=problem)  # fmt: skip
            best = max(best, measured)
            if rows is not None:
                checks.append(rows)
                nursery.start_soon(rows.check, self._recomputed)
            if problem:  # no commitment at all, or one of the wrong shape: no further round on this stream
                why = f"{target.label}: {rows_shape(sizing)}, {problem}"
                return challenge.Measured(target.name, claimed, best, why, under=late and best == measured)
            if challenge.passes(best, claimed, gpu=target.unit is not None):
                return challenge.Measured(target.name, claimed, best, "")
        why = challenge.reason(sizing.n, best, claimed, steps=sizing.steps, named=target.label)
        return challenge.Measured(target.name, claimed, best, why)

    async def _round(
        self, channel: Channel, subject: str, r: int, sizing: challenge.Sizing, target: Target
    ) -> tuple[float, str, bool, _Rows | None]:
        """One round: its measured GFLOPS, why it fails now ("" when its rows are yet to be checked),
        whether the figure is only a bound (no commitment by the deadline), and its rows to check."""
        seed = challenge.seed_of(self._key, subject)
        sent = trio.current_time()
        await channel.send(ChallengeChainSeed(round=r, n=sizing.n, steps=sizing.steps, seed=seed))
        waited = late_wait_s(sizing)
        try:  # a commitment past the deadline still counts, timed: the next round may bear the claim out
            commit = _expect(await channel.receive(timeout=waited), ChallengeCommit)
        except PeerTimeout:  # no commitment at all: far slower than the claim allows
            bound = challenge.gflops(sizing.n, waited, sizing.credit_s, sizing.steps)
            late = f"no commitment within {waited:.3g} s: under {bound:.3g} GFLOPS"
            return bound, f"{late} against {target.claimed_gflops:.3g} claimed", True, None
        elapsed = trio.current_time() - sent
        problem = challenge.commit_problem(commit.digests, sizing.n)
        if problem or commit.round != r:
            return 0.0, problem or f"a commitment for round {commit.round} in round {r}", False, None
        rows = challenge.rows_of(self._key, subject, sizing.n)
        await channel.send(ChallengeReveal(round=r, rows=rows))
        revealed = _expect(await channel.receive(timeout=STEP_S), ChallengeRows)
        measured = challenge.gflops(sizing.n, elapsed, sizing.credit_s, sizing.steps)
        return measured, "", False, _Rows(seed, sizing, rows, revealed.rows, commit.digests)


def _alone(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a nursery's group holds (its callers catch `Unanswered`, `PeerTimeout`, ...
    by type), or the group itself when it holds several."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        one = pending.pop()
        if isinstance(one, BaseExceptionGroup):
            pending.extend(one.exceptions)
        else:
            leaves.append(one)
    return leaves[0] if len(leaves) == 1 else group


def rows_shape(sizing: challenge.Sizing) -> str:
    """A round's shape for people: "n=512" or "n=512 x 930 steps"."""
    return f"n={sizing.n}" if sizing.steps == 1 else f"n={sizing.n} x {sizing.steps} steps"


@dataclass
class _Rows:
    """One round's drawn rows as the worker revealed them, checked against this submitter's own
    recomputation (`check`, beside the rounds that follow); `problem` is why they do not stand."""

    seed: int
    sizing: challenge.Sizing
    drawn: tuple[int, ...]
    revealed: tuple[bytes, ...]
    digests: bytes
    problem: str = ""

    @property
    def shape(self) -> str:
        return rows_shape(self.sizing)

    async def check(self, recompute: Recompute) -> None:
        exact = await recompute(self.seed, self.sizing.n, self.sizing.steps, self.drawn)
        self.problem = challenge.rows_problem(self.drawn, self.revealed, self.digests, exact)


@dataclass
class _Exact:
    """One recomputation begun before its round (`Challenger._ahead`): its rows once `done` (None: it
    failed, and the round recomputes them itself)."""

    key: tuple[int, int, int, tuple[int, ...]]
    rows: list[bytes] | None = None
    done: trio.Event = dataclasses.field(default_factory=trio.Event)

    async def run(self, recompute: Recompute) -> None:
        try:
            self.rows = await recompute(*self.key)
        except Exception:  # said by the round's own recomputation, which runs again
            log.debug("challenge rows recomputed ahead failed", exc_info=True)
        finally:
            self.done.set()


Recompute = Callable[[int, int, int, tuple[int, ...]], Awaitable[list[bytes]]]
"""The submitter's recomputation of the drawn rows (seed, n, steps, rows): in a thread
(`_in_thread`, numpy, only once a peer answered); a test on trio's virtual clock recomputes on the
loop, where the work takes no virtual time (a thread's wait would be idleness the clock jumps over)."""


async def _in_thread(seed: int, n: int, steps: int, rows: tuple[int, ...]) -> list[bytes]:
    from drivers.measuring.challengechild import exact_rows

    return await trio.to_thread.run_sync(exact_rows, seed, n, steps, rows)


async def by_host(views: Sequence[sch.PeerView], each: Callable[[sch.PeerView], Awaitable[None]]) -> None:
    """`each` for every view: one after another on one host (their products would share its cores),
    hosts at once. Relayed peers ("" host) share one queue: their hosts are unknown."""
    groups: dict[str, list[sch.PeerView]] = {}
    for view in views:
        groups.setdefault(view.host, []).append(view)

    async def one_by_one(group: list[sch.PeerView]) -> None:
        for view in group:
            await each(view)

    async with trio.open_nursery() as nursery:
        for group in groups.values():
            nursery.start_soon(one_by_one, group)


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


def evidence_line(m: challenge.Measured) -> str:
    """One unit's answered challenge as bundle.json keeps it: the claim, the best round, the verdict."""
    bound = "at most " if m.under else ""
    verdict = f"refused: {m.problem}" if m.problem else "borne out"
    return (
        f"{m.unit}: {bound}{m.measured_gflops:.4g} GFLOPS measured, {m.claimed_gflops:.4g} claimed; {verdict}"
    )


class Unanswered(NodeError):
    """The worker answered a challenge frame with something else, or `challenge_failed` (`detail`)."""


def _expect(message: Message, kind: type[_T]) -> _T:
    if isinstance(message, kind):
        return message
    if isinstance(message, ChallengeFailed):
        raise Unanswered(message.reason)
    raise Unanswered(f"{message.kind} where {kind.__name__} was due")


async def open_challenge(
    host: Host, peer_id: str, addrs: tuple[str, ...], protocol: str = CHALLENGE
) -> Channel:
    """A challenge stream (`protocol`: `CHALLENGE` or `CHALLENGE_UNITS`) to the worker, on `host`."""
    return await host.open_channel(peer_id, protocol, addrs=addrs, timeout=STEP_S, read_timeout=STEP_S)


__all__ = [
    "MOST_CHALLENGES",
    "RECHALLENGE_ROUNDS",
    "RECHALLENGE_S",
    "Challenger",
    "OpenChallenge",
    "Target",
    "by_host",
    "open_challenge",
    "rechallenge_s",
    "targets",
    "wants_challenge",
]
