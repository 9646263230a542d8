"""`/sark/challenge/1.2.0`, the worker's side: a submitter's drawn chain run in a spawned child.

The daemon only relays: on `challenge_open` it starts `drivers/measuring/challengechild.py` (spawned,
apart, its address space capped, a duplex pipe: it waits for its seed), answers `challenge_ready` once
the child has numpy loaded and its BLAS threads warm, and then, round by round, answers pings at once,
hands each `challenge_chain_seed` to the child and its commitment back, and each reveal the same way.
The chain is computed and hashed in the child, never in this trio loop, and the daemon imports no numpy
(it names the child's module). One challenge at a time: another submitter's gets `challenge_failed`
(busy) meanwhile, unless it comes first (below), and asks again (`node.submitter.challenge`). The
slot is held only while rounds run: a seed is due `SEED_S` after `challenge_ready` and after each
round's rows, and a reveal as long after each commitment (pings do not extend either), else the
worker says so and closes; a peer it takes no offers from starts at most `STRANGER_STARTS`
challenges per `STRANGER_EVERY_S`. The cheater's view: a stranger that opens a challenge and only
pings held the slot for the whole 90 s, again and again, so every honest `plan` and `submit` read
"busy"; now holding it costs real rounds (each bounded by the worker's own claim, at most three) and
it is given back within 5 s of silence; many keys evade the per-peer pace, but not the windows. A
CPU round is computed only if it is the CPU chain's size and no more work than `WORKER_ROUND_S` of
this worker's own claim (`scheduler.verification.challenge.cpu_round_problem`): a stranger asking
for the GPU chain's 16,384 rows, or minutes of steps, is answered `challenge_failed` before the child
computes anything; a GPU round likewise within `WORKER_ROUND_S` of the worker's claim for that
device (`gpu_round_problem`). A challenge beside a measurement disturbs both (about a second of every core).

Who comes first: a peer on the owner's `--allow` list (the submitters whose offers an `--open` worker
takes in any case) is never busy behind a stranger. Asking while a stranger's challenge holds the
slot, it ends it (the stranger's child killed and reaped, the stranger told `CHALLENGE_PREEMPTED`,
which a submitter asks again like busy) and takes the slot; a stranger waiting for the slot never
takes it before an allowed peer that waits too; allowed peers among themselves, and strangers among
themselves, wait or are busy as before. Not a second slot beside the first: two chains at once share
the cores, and the allowed submitter's timing would then read a load the stranger chooses to run
(an honest worker refused on a stranger's cue). The cheater's view: a stranger sees the worker's
advert and what its own streams are answered (ready, busy, preempted: that an allowed peer is being
served now, not who); it chooses its keys (free: as many as it likes), its streams, their timing and
its frames. The rule reads one thing: whether the stream's peer id, authenticated by the
connection's Noise handshake, is on the owner's list in this worker's config. Nothing a stranger
does moves a key onto that list (no count of rounds, no reputation, no key's age), and every fresh
key is a stranger. What it cannot do: strangers still contend with each other (an honest submitter
on no worker's list is delayed by a stranger's rounds as the windows and the pace above bound), and a
worker with `--open` and no `--allow` list has no one to put first.

The child stops when the asker stops: every wait for the child (its start, a round's commitment,
the revealed rows) watches the asker's stream at once, so a stream that ends, is reset, or whose
connection is gone (a submitter whose deadline passed, a stranger that left) stops the wait and the
child is killed and reaped then, not left computing its round; and every frame to the asker must
be taken within `SEND_S` (a reader that stopped fills its muxer's window), else the challenge ends
the same way. A reader that stops but keeps its window open costs at most the round it asked for
(bounded by the worker's claim above) and the reveal's window. One `challenge_ended` event per
challenge says how it ended and the child's exit code (`events`).

On real processes (`tests/labs/e2e/test_challenge_strangers.py`: a `join --open --allow ME` worker and a
stranger with a key of its own, `tests/kit/challenge_stranger.py`): a stranger that only pings is closed
5.2 s after its ready, and a submitter the worker does not know, busy meanwhile, asks again and is
borne out (`peers --challenge` 5.9-8.4 s); the allowed submitter ends a stranger's hold at once (the
stranger's child killed, exit -9); a round of the GPU chain's size on the CPU stream is refused within
2-9 ms with no child computing; a fourth challenge within the minute is refused by the pace.

A CPU child is made ready before it is asked (`keep_spare`, beside the daemon of a worker that `claims`
a speed: one with no calibration is never challenged by an honest submitter, and a stranger's challenge
of it starts its child then, as a stopped spare's would): spawned when the daemon starts, it imports
numpy, starts its BLAS threads and waits, idle (59 MiB resident, 31 MiB of it its own; 64 and 37 once it
has computed a round), for a challenge; each challenge begins with the child's thread trial
(`challengechild.Kernel.warm`, timed then, not at the spawn), and a child whose challenge ended with it
idle (every round it was asked answered: done, the asker closed the stream, a window passed) is kept for
the next one, its last result forgotten before the next challenge's first seed. A child stopped
mid-round (the asker gone, a stranger preempted, a failure) is killed as before, and a new spare is made
once no challenge has run for `SPARE_AFTER_S`, so that its spawn does not share the cores with a
neighbour's timed round on the same host. A spawn and numpy's import were most of what a challenge cost
a campaign's start on a busy machine (`benchmarks/challenge_cost.py`). The cheater's view: nothing in
the spare depends on a seed (it has none until one is sent); a worker that precomputes in its own child
gains nothing, since every round's inputs come from a seed drawn only as it is sent.

`/sark/challenge/1.1.0` (`serve_unit`) is the same relay for a GPU claim: opened with the unit and the
device its `gpu_tflops` names, it starts `drivers/measuring/chainchild.py` on that device (torch, CUDA
warmed before `challenge_ready`). Only `GPU (PyTorch)` has a kernel; another unit is answered
`challenge_failed` with why. Its child is not address-capped: a CUDA context reserves far more address
space than it uses (the chain itself holds 4 n KiB).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, final

import trio
import trio.lowlevel

from drivers.measuring.childio import next_message, stopped
from drivers.measuring.spawning import STARTED, Child, Entry, Limits, NotStarted, start_child
from node.errors import NodeError, PeerTimeout
from node.events import EventSink, quiet
from node.p2p.wire import Channel
from protocol import (
    CHALLENGE_BUSY,
    CHALLENGE_PINGS,
    CHALLENGE_PREEMPTED,
    CHALLENGE_ROUNDS,
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
    Message,
)
from protocol.errors import RemoteProtocolError
from scheduler.verification import challenge

log = logging.getLogger(__name__)

CHILD: Final = Entry("drivers.measuring.challengechild", "main")
CHAIN_CHILD: Final = Entry("drivers.measuring.chainchild", "main")
MEMORY_MB: Final = 1536
"""Address space the CPU child may add to its own at start (its chain holds about 4 MiB)."""
START_S: Final = 30.0
"""The child's start (a spawn and numpy's import, or torch's and a CUDA context) on a loaded machine."""
COMPUTE_S: Final = 60.0
"""The longest the child may take for one round's chain (a submitter gives up far sooner)."""
STEP_S: Final = 30.0
"""The longest this side waits for the submitter's next frame."""
ENDING_S: Final = 3.0
"""How long a new challenge waits for one that is ending (a submitter's next unit follows its last at
once) before it is answered busy."""
TOTAL_S: Final = 90.0
"""One whole challenge (a submitter's own gives up after 45 s)."""
SEED_S: Final = 5.0
"""A CPU challenge's next seed is due this long after `challenge_ready` or the last round's rows, and
a reveal this long after a commitment (an honest submitter sends its pings and its seed within a
second, its reveal at once; a pause of 1 s between rounds, and its recomputation of 16 rows of a
512-wide chain): nothing by then, the slot is given back."""
SPARE_AFTER_S: Final = 10.0
"""A spare CPU child is spawned again this long after the last challenge ended without leaving its
child idle (one host's peers are challenged one after another: a spawn at once would share its cores
with the next peer's timed round)."""
GPU_SEED_S: Final = STEP_S
"""The same for a GPU chain, whose 16 rows the submitter recomputes through up to 2,048 steps first."""
SEND_S: Final = SEED_S
"""A frame to the asker must be taken within this (its muxer's window full: it stopped reading)."""
STRANGER_EVERY_S: Final = 60.0
STRANGER_STARTS: Final = 3
"""An `--open` worker starts at most this many challenges per `STRANGER_EVERY_S` for one peer it takes
no offers from (a `plan` and a `submit` right after it are two)."""


class ChildFailed(NodeError):
    """The challenge child did not answer (`detail` says why)."""


class AskerGone(NodeError):
    """The asker's stream ended, was reset, or did not take a frame within `SEND_S` (`detail`)."""


@dataclass
class _Slot:
    """The one challenge running: whose, and how to end it (a stranger's, when an allowed peer asks)."""

    peer: str
    stranger: bool
    scope: trio.CancelScope
    done: trio.Event = field(default_factory=trio.Event)
    preempted: bool = False
    end: str = "ended by its deadline"
    child_exit: int | None = None


@final
class Challenges:
    """Serves `/sark/challenge/1.2.0` (and `1.1.0`), one challenge at a time."""

    def __init__(
        self,
        allow: frozenset[str] = frozenset(),
        *,
        open_mode: bool = True,
        claimed_gflops: float | None = None,
        gpu_claims: dict[str, float] | None = None,
        events: EventSink = quiet,
        spare_after_s: float = SPARE_AFTER_S,
    ) -> None:
        """`allow`: the submitters whose offers this worker takes (the owner's `--allow` list): only
        they may challenge it unless `open_mode`, and with it they come first (a stranger's challenge
        is ended for theirs). `claimed_gflops`: this worker's own CPU claim, which bounds the CPU
        rounds it computes (`scheduler.verification.challenge.cpu_round_problem`); `gpu_claims`, its
        claim per CUDA device in GFLOPS, bounds that device's rounds (`gpu_round_problem`). `events`: a
        `challenge_computing` line per round handed to the child (peer, round, n, steps) and one
        `challenge_ended` per challenge given the slot (peer, how it ended, the child's exit code
        once reaped; None when the child was kept for the next challenge); a `challenge_spare` (its
        pid, kept or spawned) each time a CPU child starts waiting for the next challenge.
        `spare_after_s`: how long after a challenge that used its child up a new spare is spawned
        (`SPARE_AFTER_S`)."""
        self._allow = allow
        self._spare_after_s = spare_after_s
        self._open_mode = open_mode
        self._claimed = claimed_gflops
        self._gpu_claims = dict(gpu_claims or {})
        self._emit = events
        self._slot: _Slot | None = None
        self._allowed_waiting = 0
        """Allowed peers waiting for the slot: a stranger does not take it before them."""
        self._strangers: dict[str, list[float]] = {}
        """Peers taken no offers from -> when their challenges started (trio's clock), recent ones."""
        self._spare: _Spare | None = None
        """A CPU child made ready before it is asked (`keep_spare`), or kept idle from the last challenge."""
        self._last_end = -math.inf
        """When the last challenge ended (trio's clock): a new spare waits `SPARE_AFTER_S` after it."""
        self._spare_wanted = trio.Event()
        self._keeping = False
        """Whether `keep_spare` runs (else a challenge's child is stopped with it, as none would reap it)."""

    @property
    def claims(self) -> bool:
        """Whether this worker claims a speed a submitter challenges (its CPU's, or a CUDA device's):
        without one no honest submitter asks (`node.submitter.challenge.targets`), so no spare waits."""
        return self._claimed is not None or bool(self._gpu_claims)

    @property
    def spare_pid(self) -> int | None:
        """The process id of the CPU child waiting for the next challenge (None: none waits)."""
        return self._spare.child.process.pid if self._spare is not None else None

    async def keep_spare(self) -> None:
        """Keep one CPU challenge child ready while the daemon runs (see the module docstring): one
        at once, another `SPARE_AFTER_S` after a challenge that used its child up; the spare is
        stopped and reaped when this is cancelled."""
        self._keeping = True
        try:
            while True:
                if self._spare is None and self._slot is None:
                    wait = self._last_end + self._spare_after_s - trio.current_time()
                    if wait <= 0:
                        try:
                            self._spare = _Spare(_start(CHILD))
                        except NotStarted as exc:
                            log.debug("no spare challenge child: %s", exc.detail)
                            return
                        self._emit("challenge_spare", pid=self.spare_pid, kept=False)
                        continue
                    await trio.sleep(wait)
                    continue
                self._spare_wanted = trio.Event()
                await self._spare_wanted.wait()
        finally:
            self._keeping = False
            spare, self._spare = self._spare, None
            if spare is not None:
                await stopped(spare.child)

    async def serve(self, channel: Channel) -> None:
        """One CPU challenge, from `challenge_open` to the stream's end (see the module docstring),
        within `TOTAL_S`."""
        opened = await channel.receive(timeout=STEP_S)
        if not isinstance(opened, ChallengeOpen):
            raise RemoteProtocolError(f"a challenge stream opens with challenge_open, not {opened.kind}")
        await self._guarded(channel, CHILD, ())

    async def serve_unit(self, channel: Channel) -> None:
        """One GPU challenge (`/sark/challenge/1.1.0`), from `challenge_unit_open` to the stream's end."""
        opened = await channel.receive(timeout=STEP_S)
        if not isinstance(opened, ChallengeUnitOpen):
            raise RemoteProtocolError(f"a unit challenge opens with challenge_unit_open, not {opened.kind}")
        if opened.unit != ComputeUnit.GPU_TORCH:
            why = f"no challenge kernel for {opened.unit.value} (only {ComputeUnit.GPU_TORCH.value})"
            await channel.send(ChallengeFailed(reason=why))
            return
        await self._guarded(channel, CHAIN_CHILD, (opened.device,))

    async def _guarded(self, channel: Channel, entry: Entry, args: tuple[object, ...]) -> None:
        stranger = channel.peer_id not in self._allow  # the owner's list, never what a peer did or said
        if not self._open_mode and stranger:
            await channel.send(ChallengeFailed(reason="not a submitter this worker takes offers from"))
            return
        if not await self._slot_free(stranger):
            await channel.send(ChallengeFailed(reason=CHALLENGE_BUSY))
            return
        if stranger and not self._paced(channel.peer_id):
            why = f"rate: {STRANGER_STARTS} challenges per {STRANGER_EVERY_S:g} s for a peer not allowed"
            await channel.send(ChallengeFailed(reason=why))
            return
        scope = trio.CancelScope(deadline=trio.current_time() + TOTAL_S)
        slot = self._slot = _Slot(channel.peer_id, stranger, scope)
        try:
            with scope:
                await self._run(channel, entry, args, slot)
        finally:
            self._slot = None
            self._last_end = trio.current_time()
            self._spare_wanted.set()
            slot.done.set()
        if slot.preempted:
            slot.end = "preempted by an allowed peer"
            with trio.move_on_after(SEND_S):  # the slot is free already: this only tells the stranger
                await channel.send(ChallengeFailed(reason=CHALLENGE_PREEMPTED))
        log.debug("challenge from %s ended: %s", channel.peer_id, slot.end)
        self._emit("challenge_ended", peer=channel.peer_id, end=slot.end, child_exit=slot.child_exit)

    async def _slot_free(self, stranger: bool) -> bool:
        """Whether the slot is free (then taken by the caller at once): a stranger's is ended for an
        allowed peer, whose wait is then its child's kill and reap; otherwise one that is ending (a
        submitter's next unit follows its last at once) is awaited `ENDING_S`."""
        deadline = trio.current_time() + ENDING_S
        if not stranger:
            self._allowed_waiting += 1
        try:
            while (slot := self._slot) is not None or (stranger and self._allowed_waiting):
                if slot is not None and slot.stranger and not stranger:
                    slot.preempted = True
                    slot.scope.cancel()
                    await slot.done.wait()  # shielded kill and reap: moments
                    continue
                if trio.current_time() >= deadline:
                    return False
                with trio.move_on_at(deadline):
                    if slot is None:  # an allowed peer woke for it and takes it in a moment
                        await trio.lowlevel.checkpoint()
                    else:
                        await slot.done.wait()
            return True
        finally:
            if not stranger:
                self._allowed_waiting -= 1

    def _paced(self, peer: str) -> bool:
        """Whether a stranger may start a challenge now (and if so, counted)."""
        now = trio.current_time()
        self._strangers = {
            p: kept
            for p, starts in self._strangers.items()
            if (kept := [t for t in starts if now - t < STRANGER_EVERY_S])
        }
        starts = self._strangers.setdefault(peer, [])
        if len(starts) >= STRANGER_STARTS:
            return False
        starts.append(now)
        return True

    async def _run(self, channel: Channel, entry: Entry, args: tuple[object, ...], slot: _Slot) -> None:
        """The challenge with its child; how it ended and the child's exit code in `slot` (the child
        is reaped before this returns, even when cancelled)."""
        spare = self._take_spare() if entry == CHILD else None
        try:
            spare = spare or _Spare(_start(entry, args))
        except NotStarted as exc:
            await channel.send(ChallengeFailed(reason=exc.detail[:500]))
            slot.end = "the child did not start"
            return
        child, idle = spare.child, False
        try:
            if not spare.ready:
                await _beside_asker(channel, child, START_S, "ready")
                spare.ready = True
            if entry == CHILD:  # the thread trial, timed now; the last challenge's result forgotten
                child.receiver.send(("warm",))
                await _beside_asker(channel, child, START_S, "warmed")
            await _send(channel, ChallengeReady())
            claimed = self._claimed if entry == CHILD else self._gpu_claims.get(str(args[0]))
            computing = partial(self._emit, "challenge_computing", peer=channel.peer_id)
            slot.end = await _rounds(channel, child, claimed, computing, cpu=entry == CHILD)
            idle = entry == CHILD  # every request it was sent is answered: it waits for the next
        except ChildFailed as exc:
            slot.end = f"the child failed: {exc.detail}"
            with trio.move_on_after(SEND_S):
                await channel.send(ChallengeFailed(reason=exc.detail[:500]))
        except AskerGone as exc:
            slot.end = f"the asker left: {exc.detail}"
        finally:
            if idle and self._keeping and self._spare is None and child.process.is_alive():
                self._spare = spare  # kept for the next challenge
                self._emit("challenge_spare", pid=self.spare_pid, kept=True)
            else:
                await stopped(child)
                slot.child_exit = child.process.exitcode

    def _take_spare(self) -> _Spare | None:
        """The ready CPU child, if one is alive (then it is this challenge's)."""
        spare, self._spare = self._spare, None
        if spare is not None and not spare.child.process.is_alive():
            spare.child.stop()  # it died idle: reaped now (moments), and a fresh one started instead
            return None
        return spare


@dataclass
class _Spare:
    """A challenge child and whether it has said `ready` yet."""

    child: Child
    ready: bool = False


def _start(entry: Entry, args: tuple[object, ...] = ()) -> Child:
    """A challenge child (the CPU's address-capped), started; it says `ready` once loaded.

    Raises:
        NotStarted: the system refused to start it.
    """
    limits = Limits(MEMORY_MB) if entry == CHILD else Limits()
    return start_child(entry, args, name="sark-challenge", limits=limits, duplex=True)


async def _send(channel: Channel, message: Message) -> None:
    """One frame to the asker, taken within `SEND_S` (a muxer's window full: it stopped reading).

    Raises:
        AskerGone: not taken, or the stream is gone.
    """
    try:
        with trio.move_on_after(SEND_S):
            await channel.send(message)
            return
    except NodeError as exc:
        raise AskerGone(f"{message.kind} not sent: {exc.detail}") from exc
    raise AskerGone(f"{message.kind} not taken within {SEND_S:g} s: it stopped reading")


async def _rounds(
    channel: Channel, child: Child, claimed: float | None, computing: Callable[..., None], *, cpu: bool
) -> str:
    """Pings, seeds and reveals, at most the protocol's count of each, until the submitter is done; a
    round larger than the chain or this worker's own claim for the unit allows is refused with why;
    `computing` is told each round handed to the child. Returns how it ended.

    Raises:
        AskerGone: the asker left, or stopped reading, while its child computed or its answer was sent.
        ChildFailed: the child did not answer.
        RemoteProtocolError: a frame out of turn.
    """
    pings = seeds = reveals = 0
    window = SEED_S if cpu else GPU_SEED_S
    due = trio.current_time() + window  # the next seed or reveal; a ping never moves it
    while reveals < CHALLENGE_ROUNDS:
        left = due - trio.current_time()
        if left <= 0:
            wanted = "seed" if seeds == reveals else "reveal"
            closed = f"no {wanted} within {window:g} s: the challenge is closed"
            await _send(channel, ChallengeFailed(reason=closed))
            return closed
        try:
            asked = await channel.receive(timeout=min(left, STEP_S))
        except PeerTimeout:
            if trio.current_time() >= due:
                continue  # the window passed: said, then closed
            return "no frame within its step"
        except NodeError:
            return "the asker closed the stream"  # it took the rounds it wanted
        if isinstance(asked, ChallengePing) and pings < CHALLENGE_ROUNDS * CHALLENGE_PINGS:
            pings += 1
            await _send(channel, ChallengePong(round=asked.round))
        elif isinstance(asked, ChallengeChainSeed) and seeds == reveals:
            bound = challenge.cpu_round_problem if cpu else challenge.gpu_round_problem
            if why := bound(asked.n, asked.steps, claimed):
                await _send(channel, ChallengeFailed(reason=f"round {asked.round} refused: {why}"))
                return f"round {asked.round} refused"
            seeds += 1
            child.receiver.send(("chain", asked.n, asked.steps, asked.seed))
            computing(round=asked.round, n=asked.n, steps=asked.steps)
            digests = (await _beside_asker(channel, child, COMPUTE_S, "commit"))[1]
            await _send(channel, ChallengeCommit(round=asked.round, digests=digests))
            due = trio.current_time() + window
        elif isinstance(asked, ChallengeReveal) and reveals < seeds:
            reveals += 1
            child.receiver.send(("reveal", asked.rows))
            rows = await _beside_asker(channel, child, STEP_S, "rows")
            await _send(channel, ChallengeRows(round=asked.round, rows=tuple(rows[1])))
            due = trio.current_time() + window
        else:
            raise RemoteProtocolError(f"{asked.kind} out of turn on a challenge stream")
    return "done"


async def _beside_asker(channel: Channel, child: Child, timeout: float, want: str) -> tuple[Any, ...]:
    """The child's next message of kind `want`, watching the asker's stream meanwhile: a stream that
    ends or is reset (a submitter whose deadline passed, a stranger gone) stops the wait at once, so
    that the child is stopped then and not left computing for nobody.

    Raises:
        AskerGone: the stream ended first.
        ChildFailed: the child did not answer.
        RemoteProtocolError: the asker sent a frame while it was due to wait.
    """
    ended: list[tuple[Any, ...] | Exception] = []  # the first of the two to end
    async with trio.open_nursery() as nursery:

        async def computed() -> None:
            try:
                ended.append(await _answer(child, timeout, want))
            except ChildFailed as exc:
                ended.append(exc)
            nursery.cancel_scope.cancel()

        async def hung_up() -> None:
            try:
                early = await channel.receive(timeout=timeout + STEP_S)  # the child's own bound ends first
                ended.append(RemoteProtocolError(f"{early.kind} while the child computes its {want}"))
            except NodeError as exc:
                ended.append(AskerGone(f"before the child's {want}: {exc.detail}"))
            nursery.cancel_scope.cancel()

        nursery.start_soon(computed)
        nursery.start_soon(hung_up)
    if isinstance(ended[0], Exception):
        raise ended[0]
    return ended[0]


async def _answer(child: Child, timeout: float, want: str) -> tuple[Any, ...]:
    """The child's next message of kind `want` (its start message skipped), or `ChildFailed`."""
    with trio.move_on_after(timeout):
        while True:
            try:
                message = await next_message(child)
            except NotStarted as exc:
                raise ChildFailed(exc.detail) from exc
            if message is None:
                await trio.to_thread.run_sync(child.process.join)
                raise ChildFailed(child.ended())
            if message[0] == want:
                return message
            if message[0] != STARTED:
                raise ChildFailed(f"the challenge child: {message[-1]}")
    raise ChildFailed(f"the challenge child did not answer within {timeout:g} s")


__all__ = ["Challenges"]
