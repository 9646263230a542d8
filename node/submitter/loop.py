"""The submitter's campaign loop: discovery, one attempt per offer, the scheduler, the store.

One task (this loop) owns the scheduler and feeds it events; attempts report notes through a
bounded channel and obey the commands routed to them. Every result is verified, checked against the
task's current lease, and stored in SQLite before it is acknowledged.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, final

import trio

import scheduler as sch
from node.events import EventSink, quiet
from node.submitter.attempt import (
    Attempt,
    Committed,
    Declined,
    Failed,
    Heartbeat,
    Identity,
    Lapsed,
    Lost,
    Note,
    OpenChannel,
    Rejected,
    Verified,
    run_attempt,
)
from node.submitter.discovery import Discovery
from node.submitter.outputs import pack_envelope
from node.submitter.store import CampaignStore, ResultRecord
from protocol import FailureReason, Holder, ModelRef

log = logging.getLogger(__name__)

View = Callable[[Sequence[sch.TaskView]], None]
Injected = sch.PeersDiscovered | sch.CancelRequested
"""Events that reach the loop from its own helpers (discovery, the cancel watch) rather than attempts."""

CANCEL_POLL_S = 1.0
WIND_DOWN_S = 3.0


def utc_now() -> str:
    """The current time as the CSV's CreatedUtc column writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Tally:
    """What happened to results in this run, for the summary and the chaos report."""

    accepted: int = 0
    stale: int = 0
    rejected: int = 0
    lapsed: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@final
class CampaignLoop:
    """Runs one campaign to its end (or until cancelled) and keeps the store current."""

    def __init__(
        self,
        *,
        campaign_id: str,
        scheduler: sch.Scheduler,
        store: CampaignStore,
        discovery: Discovery,
        me: Identity,
        open_channel: OpenChannel,
        view: View = lambda _: None,
        events: EventSink = quiet,
    ) -> None:
        self._id = campaign_id
        self._sched = scheduler
        self._store = store
        self._discovery = discovery
        self._me = me
        self._open = open_channel
        self._view = view
        self._emit = events
        self._inboxes: dict[str, trio.MemorySendChannel[sch.Command]] = {}
        self._attempts: dict[str, Attempt] = {}
        self.tally = Tally()
        self._notes_in: trio.MemorySendChannel[Note | Injected]
        self._notes_out: trio.MemoryReceiveChannel[Note | Injected]
        self._notes_in, self._notes_out = trio.open_memory_channel(4096)
        self._idle = trio.Event()
        self._holders_of: dict[str, dict[str, tuple[str, ...]]] = {}
        self._fetching: set[tuple[str, str]] = set()  # (sha256, peer) of every commit

    def request_cancel(self) -> None:
        """Cancel the campaign: running tasks are cancelled on their workers."""
        self._notes_in.send_nowait(sch.CancelRequested())

    async def run(self) -> None:
        """Until the scheduler says the campaign is finished (a restored one first reclaims its leases)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            started = trio.current_time()
            peers = await self._discovery.initial()
            self._emit("discovered", peers=len(peers), seconds=round(trio.current_time() - started, 3))
            self._apply(self._sched.handle(sch.PeersDiscovered(peers=peers), time.time()))
            self._save()
            nursery.start_soon(self._rediscover)
            nursery.start_soon(self._watch_cancel)
            await self._loop()
            await self._wind_down()
            nursery.cancel_scope.cancel()
        self._save()

    async def _wind_down(self) -> None:
        """Let the last commands (acks, cancels) reach their workers before the streams close."""
        for inbox in list(self._inboxes.values()):
            inbox.close()
        with trio.move_on_after(WIND_DOWN_S):
            while self._inboxes:
                self._idle = trio.Event()
                await self._idle.wait()

    async def _loop(self) -> None:
        while not self._sched.done:
            self._view(self._sched.tasks())
            event = await self._next(self._sched.next_deadline())
            now = time.time()
            sched_event = self._translate(event) if event is not None else sch.Tick()
            if sched_event is None:
                continue
            self._apply(self._sched.handle(sched_event, now))
            if not isinstance(sched_event, sch.ProgressReported):
                self._save()
        self._view(self._sched.tasks())

    async def _next(self, deadline: float | None) -> Note | Injected | None:
        timeout = math.inf if deadline is None else max(0.0, deadline - time.time())
        with trio.move_on_after(timeout):
            return await self._notes_out.receive()
        return None

    async def _watch_cancel(self) -> None:
        """`sark-node cancel` (another process) leaves a mark in the store: act on it."""
        while True:  # another process writes the mark: there is nothing to wait on but the store
            if await trio.to_thread.run_sync(self._store.cancel_requested, self._id):
                break
            await trio.sleep(CANCEL_POLL_S)
        self._emit("cancelling", campaign=self._id)
        await self._notes_in.send(sch.CancelRequested(detail="cancelled with sark-node cancel"))

    async def _rediscover(self) -> None:
        async for peers in self._discovery.updates():
            await self._notes_in.send(sch.PeersDiscovered(peers=peers))

    def _save(self) -> None:
        status = "finished" if self._sched.done else "running"
        self._store.save_state(self._id, self._sched.snapshot().model_dump_json().encode(), status)

    # -- commands out ----------------------------------------------------------------------------

    def _apply(self, commands: Sequence[sch.Command]) -> None:
        for command in commands:
            if isinstance(command, sch.SendOffer):
                self._start_offer(command)
            elif isinstance(command, sch.SendDispatch | sch.SendAck | sch.SendCancel):
                inbox = self._inboxes.get(command.task_id)
                if inbox is not None:
                    inbox.send_nowait(command)
            elif isinstance(command, sch.SendReclaim):
                self._start_reclaim(command)
            elif isinstance(command, sch.MarkUnschedulable):
                log.info("job %s unschedulable: %s", command.job_index, command.detail)
                self._emit(
                    "unschedulable",
                    job=command.job_index,
                    detail=command.detail,
                    reasons={k: list(v) for k, v in command.reasons.items()},
                )
            elif isinstance(command, sch.FinishCampaign):
                self._emit(
                    "finished",
                    campaign=self._id,
                    complete=command.complete,
                    failed=command.failed,
                    unschedulable=command.unschedulable,
                )

    def _holders(self, sha256: str, peer_id: str) -> tuple[Holder, ...]:
        """Peers offered this model before (they hold it, or soon will), direct ones only: model
        bytes never cross a relay. The earliest first (the likeliest to have it); at most 16."""
        known = self._holders_of.setdefault(sha256, {})
        holders = tuple(Holder(peer_id=p, addrs=a[:8]) for p, a in known.items() if p != peer_id)[:16]
        if self._discovery.reachability(peer_id) != "relayed":
            known[peer_id] = self._discovery.direct_addrs(peer_id)
        return holders

    def _forget_holder(self, peer_id: str, sha256: str | None = None) -> None:
        """Name `peer_id` to no one as a holder (of `sha256`, or of any model): it may be gone, or it
        declined and will not fetch the model."""
        for sha, known in self._holders_of.items():
            if sha256 in (None, sha):
                known.pop(peer_id, None)

    def _start_offer(self, command: sch.SendOffer) -> None:
        self._emit("offered", task=command.task_id, peer=command.peer_id)
        attempt = Attempt(
            campaign_id=self._id,
            task_id=command.task_id,
            peer_id=command.peer_id,
            addrs=self._discovery.addrs(command.peer_id),
            spec=command.spec,
            model=command.model,
            priority=command.priority,
            holders=self._holders(command.model.sha256, command.peer_id) if not command.model.sources else (),
        )
        self._launch(attempt)

    def _start_reclaim(self, command: sch.SendReclaim) -> None:
        task = self._task(command.task_id)
        attempt = Attempt(
            campaign_id=self._id,
            task_id=command.task_id,
            peer_id=command.peer_id,
            addrs=self._discovery.addrs(command.peer_id),
            model=task.model,
            reclaim_lease=command.lease_id,
            reclaim_ttl_s=task.lease_ttl_s,
        )
        self._launch(attempt)

    def _task(self, task_id: str) -> sch.TaskView:
        return next(t for t in self._sched.tasks() if t.task_id == task_id)

    def _launch(self, attempt: Attempt) -> None:
        send, receive = trio.open_memory_channel[sch.Command](16)
        self._inboxes[attempt.task_id] = send
        self._attempts[attempt.task_id] = attempt
        self._nursery.start_soon(self._attempt, attempt, send, receive)

    async def _attempt(
        self,
        attempt: Attempt,
        send: trio.MemorySendChannel[sch.Command],
        receive: trio.MemoryReceiveChannel[sch.Command],
    ) -> None:
        try:
            await run_attempt(attempt, self._me, self._open, receive, self._notes_in)
        finally:
            if self._inboxes.get(attempt.task_id) is send:
                del self._inboxes[attempt.task_id]
            self._idle.set()

    # -- notes in --------------------------------------------------------------------------------

    def _translate(self, note: Note | Injected) -> sch.Event | None:
        if isinstance(note, sch.PeersDiscovered):
            self._emit("peers", peers=sorted(p.peer_id for p in note.peers))
            return note
        if isinstance(note, sch.CancelRequested):
            return note
        return self._from_attempt(note)

    def _from_attempt(self, note: Note) -> sch.Event | None:
        a = note.attempt
        if not isinstance(note, Lapsed | Rejected | Verified):
            self._emit(type(note).__name__.lower(), task=a.task_id, peer=a.peer_id, **_fields(note))
        match note:
            case Committed():
                if a.model is not None:
                    self._fetching.add((a.model.sha256, a.peer_id))
                return sch.OfferCommitted(
                    task_id=a.task_id,
                    peer_id=a.peer_id,
                    lease_id=note.lease_id,
                    queue_position=note.queue_position,
                    lease_ttl_s=note.lease_ttl_s,
                )
            case Declined():
                if a.model is not None and (a.model.sha256, a.peer_id) not in self._fetching:
                    self._forget_holder(a.peer_id, a.model.sha256)
                return sch.OfferDeclined(
                    task_id=a.task_id,
                    peer_id=a.peer_id,
                    reason=note.decline.reason,
                    detail=note.decline.detail,
                )
            case Lost():
                self._forget_holder(a.peer_id)
                return sch.OfferLost(task_id=a.task_id, peer_id=a.peer_id, detail=note.detail)
            case Heartbeat():
                p = note.progress
                return sch.ProgressReported(
                    task_id=a.task_id,
                    lease_id=p.lease_id,
                    phase=p.phase,
                    done=p.done,
                    total=p.total,
                    median_ms=p.median_ms,
                    queue_position=p.queue_position,
                )
            case Failed():
                f = note.failure
                return sch.TaskFailedRemotely(
                    task_id=a.task_id, lease_id=f.lease_id, reason=f.reason, detail=f.detail, stage=f.stage
                )
            case Lapsed():
                self._forget_holder(a.peer_id)
                self.tally.lapsed += 1
                self._record("lapsed", a, note.detail)
                return sch.LeaseLapsed(task_id=a.task_id, lease_id=note.lease_id)
            case Rejected():
                self.tally.rejected += 1
                self._record("rejected", a, note.detail)
                return sch.TaskFailedRemotely(
                    task_id=a.task_id,
                    lease_id=note.lease_id,
                    reason=FailureReason.INTERNAL,
                    detail=f"rejected result: {note.detail}",
                )
            case Verified():
                return self._accept(note)
        return None

    def _accept(self, note: Verified) -> sch.Event | None:
        a = note.attempt
        if self._sched.current_lease(a.task_id) != note.lease_id:
            self.tally.stale += 1
            self._record("stale", a, f"result for lease {note.lease_id} is stale")
            log.info("rejected a stale result for %s (lease %s)", a.task_id, note.lease_id)
            return None
        row = sch.result_row(self._task(a.task_id), note.body, "verified", utc_now())
        record = ResultRecord(
            task_id=a.task_id,
            lease_id=note.lease_id,
            peer_id=a.peer_id,
            status="Complete",
            envelope=pack_envelope(note.envelope),
            row=row,
            samples=note.body.measurement.samples_ms,
        )
        self._store.put_result(self._id, record, utc_now())
        self.tally.accepted += 1
        self._record("accepted", a, "")
        median = note.body.measurement.inference_ms.median
        return sch.ResultAccepted(
            task_id=a.task_id, lease_id=note.lease_id, peer_id=a.peer_id, median_ms=median
        )

    def _record(self, what: str, attempt: Attempt, detail: str) -> None:
        self.tally.events.append(
            {
                "event": what,
                "task": attempt.task_id,
                "peer": attempt.peer_id,
                "t": time.time(),
                "detail": detail,
            }
        )
        self._emit(what, task=attempt.task_id, peer=attempt.peer_id, detail=detail)


def _fields(note: Note) -> dict[str, Any]:
    """The interesting fields of a note, for its event line."""
    match note:
        case Committed():
            return {"lease": note.lease_id, "queue_position": note.queue_position}
        case Declined():
            return {"reason": note.decline.reason.value, "detail": note.decline.detail}
        case Lost():
            return {"detail": note.detail}
        case Heartbeat():
            p = note.progress
            return {"lease": p.lease_id, "phase": p.phase.value, "done": p.done, "total": p.total}
        case Failed():
            return {
                "lease": note.failure.lease_id,
                "reason": note.failure.reason.value,
                "detail": note.failure.detail,
            }
    return {}


def models_json(models: dict[str, ModelRef]) -> dict[str, Any]:
    """The pinned models as the store keeps them."""
    return {key: ref.model_dump(mode="json") for key, ref in models.items()}
