"""The submitter's campaign loop: discovery, one attempt per offer, the scheduler, the store.

One task (this loop) owns the scheduler and feeds it events; attempts report the scheduler events
they hear (`Heard`) through a bounded channel and obey the commands routed to them. Every result is
verified, checked against the task's current lease, its figures derived again from its raw parts and
its readings bounded by the profile it was placed by, and a load client's records checked against
the schedule this submitter gave it (a fleet member's signed deal, or a lone open loop's seed, drawn
here for its offer), all in `node.submitter.verdict`: a refused one is a `ResultRejected`; an
accepted one is stored in SQLite before it is acknowledged.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar, final

import trio

import scheduler as sch
from node.errors import CampaignInterrupted
from node.events import EventSink, quiet
from node.submitter.attempt import Attempt, Delivered, Heard, Identity, OpenChannel, run_attempt
from node.submitter.challenge import Challenger
from node.submitter.discovery import Discovery
from node.submitter.eventlines import event_line
from node.submitter.fleet import FleetBook, with_deal
from node.submitter.floors import FloorBook
from node.submitter.store import CampaignStatus, CampaignStore
from node.submitter.verdict import Counted, judge
from protocol import FleetDeal, Holder, Reachability, TaskSpec
from protocol.codec import pack_body, unpack_body

log = logging.getLogger(__name__)

View = Callable[[Sequence[sch.TaskView]], None]
Injected = sch.PeersDiscovered | sch.CancelRequested | sch.SubmitterStopped
"""Events that reach the loop from its own helpers (discovery, the cancel and stop watches), not attempts."""

CANCEL_POLL_S = 1.0
WIND_DOWN_S = 3.0
STALL_S: Final = 0.5
"""A wake-up this much later than asked means this process was not running (a starved machine)."""

_T = TypeVar("_T")


async def heard_within(heard: trio.MemoryReceiveChannel[_T], timeout: float) -> _T | None:
    """The next event within `timeout`, or None (the loop then acts on its deadlines: a lease with no
    heartbeat lapses). What is already heard comes first: a result read while this loop was busy past
    its lease's deadline is the worker's word, not its silence (a wait of no time is cancelled before
    it takes what is queued). When this process wakes for the deadline `STALL_S` or more after it asked, it
    was not running meanwhile (at load 20 on 2 cores its one thread got a tenth of a core): a worker's
    heartbeat may be waiting unread in its stream, behind the very deadline it would have moved. So
    the loop listens as long again as it was late before it judges any silence: a lease lapses only
    for silence while this submitter was listening. The cheater's view: the wait is this process's
    own lateness on its own clock, nothing a worker reports; a worker that is gone still lapses, one
    stall later."""
    try:
        item = heard.receive_nowait()
    except trio.WouldBlock:
        pass
    else:
        await trio.lowlevel.checkpoint()
        return item
    asked = trio.current_time() + timeout
    with trio.move_on_after(timeout):
        return await heard.receive()
    late = trio.current_time() - asked
    if late >= STALL_S:
        with trio.move_on_after(late):
            return await heard.receive()
    return None


@dataclass
class Tally:
    """What happened to results in this run, for the summary and the chaos report."""

    accepted: int = 0
    stale: int = 0
    rejected: int = 0
    lapsed: int = 0
    released: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@final
class CampaignLoop:
    """Runs one campaign to its end (or until cancelled) and keeps the store current."""

    def __init__(
        self,
        *,
        campaign_id: str,
        campaign: sch.Campaign,
        scheduler: sch.Scheduler,
        store: CampaignStore,
        discovery: Discovery,
        me: Identity,
        open_channel: OpenChannel,
        view: View = lambda _: None,
        events: EventSink = quiet,
        stop: trio.Event | None = None,
        fleet: FleetBook | None = None,
        challenger: Challenger | None = None,
    ) -> None:
        self._id = campaign_id
        self._campaign = campaign
        self._sched = scheduler
        self._store = store
        self._discovery = discovery
        self._me = me
        self._open = open_channel
        self._view = view
        self._emit = events
        self._stop = stop if stop is not None else trio.Event()
        self._fleet = fleet or FleetBook(campaign)
        self._floors = FloorBook(
            campaign, me.keys, keep=lambda job, state: store.put_floorbook(campaign_id, job, state)
        )
        self._floors.restore(store.floorbooks(campaign_id))  # a resumed campaign's, as it left them
        # (task, lease) -> its count, with the submitter's own probes of the server finished before the read
        self._server_counts: dict[tuple[str, str], tuple[sch.ServerCount, sch.Claimed]] = {}
        self._challenger = challenger
        self._inboxes: dict[str, trio.MemorySendChannel[sch.Command]] = {}
        self._attempts: dict[str, Attempt] = {}
        self.tally = Tally()
        self._heard_in: trio.MemorySendChannel[Heard | Injected]
        self._heard_out: trio.MemoryReceiveChannel[Heard | Injected]
        self._heard_in, self._heard_out = trio.open_memory_channel(4096)
        self._idle = trio.Event()
        self._holders_of: dict[str, dict[str, tuple[str, ...]]] = {}
        self._fetching: set[tuple[str, str]] = set()  # (sha256, peer) of every commit
        self._stopped = False  # the scheduler has withdrawn what was out: the loop ends
        self._cancelled = False  # the scheduler took a cancel: the campaign ends "cancelled"

    def request_cancel(self) -> None:
        """Cancel the campaign: running tasks are cancelled on their workers."""
        self._heard_in.send_nowait(sch.CancelRequested())

    async def run(self) -> None:
        """Until the scheduler says the campaign is finished (a restored one first reclaims its leases).

        Raises:
            CampaignInterrupted: `stop` was set (Ctrl-C): what was out on offer or lease is withdrawn
                (the workers are told), and the store says "interrupted".
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._watch_stop)
            started = trio.current_time()
            records = await trio.to_thread.run_sync(self._store.peer_records, time.time())
            self._sched.know_records(records, await trio.to_thread.run_sync(self._store.class_errors))
            peers = await self._vouched(await self._discovery.initial())
            self._emit("discovered", peers=len(peers), seconds=round(trio.current_time() - started, 3))
            if not self._stop.is_set():  # stopped while looking: nothing went out, nothing to withdraw
                self._apply(self._sched.handle(sch.PeersDiscovered(peers=peers), time.time()))
                self._save()
                nursery.start_soon(self._rediscover)
                nursery.start_soon(self._watch_cancel)
                await self._loop()
                await self._wind_down()
            nursery.cancel_scope.cancel()
        self._save()
        if self._stop.is_set() and not self._sched.done:
            self._emit("interrupted", campaign=self._id)
            raise CampaignInterrupted(self._id)

    async def _wind_down(self) -> None:
        """Let the last commands (acks, cancels) reach their workers before the streams close."""
        for inbox in list(self._inboxes.values()):
            inbox.close()
        with trio.move_on_after(WIND_DOWN_S):
            while self._inboxes:
                self._idle = trio.Event()
                await self._idle.wait()

    async def _loop(self) -> None:
        while not self._sched.done and not self._stopped:
            self._view(self._sched.tasks())
            event = await self._next(self._sched.next_deadline())
            now = time.time()
            sched_event = self._translate(event) if event is not None else sch.Tick()
            if sched_event is None:
                continue
            self._cancelled |= isinstance(sched_event, sch.CancelRequested)
            self._apply(self._sched.handle(sched_event, now))
            if not isinstance(sched_event, sch.ProgressReported | sch.MessageArriving):
                self._save()
        self._view(self._sched.tasks())

    async def _next(self, deadline: float | None) -> Heard | Injected | None:
        timeout = math.inf if deadline is None else max(0.0, deadline - time.time())
        return await heard_within(self._heard_out, timeout)

    async def _watch_cancel(self) -> None:
        """`sark-node cancel` (another process) leaves a mark in the store: act on it."""
        while True:  # another process writes the mark: there is nothing to wait on but the store
            if await trio.to_thread.run_sync(self._store.cancel_requested, self._id):
                break
            await trio.sleep(CANCEL_POLL_S)
        self._emit("cancelling", campaign=self._id)
        await self._heard_in.send(sch.CancelRequested(detail="cancelled with sark-node cancel"))

    async def _watch_stop(self) -> None:
        await self._stop.wait()
        await self._heard_in.send(sch.SubmitterStopped("the submitter was interrupted (Ctrl-C)"))

    async def _rediscover(self) -> None:
        async for peers in self._discovery.updates():
            await self._heard_in.send(sch.PeersDiscovered(peers=await self._vouched(peers)))

    async def _vouched(self, peers: tuple[sch.PeerView, ...]) -> tuple[sch.PeerView, ...]:
        """The peers, each new one's claimed speed challenged first (a campaign that asks `verify:`)."""
        if self._challenger is None:
            return peers
        return tuple(await self._challenger.vouch(peers, self._discovery.addrs))

    def _save(self) -> None:
        ended = CampaignStatus.CANCELLED if self._cancelled else CampaignStatus.FINISHED
        status = ended if self._sched.done else CampaignStatus.RUNNING
        if self._stop.is_set() and not self._sched.done:
            status = CampaignStatus.INTERRUPTED
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
                    reasons={k: [r.detail for r in v] for k, v in command.reasons.items()},
                )
            elif isinstance(command, sch.AwaitChallenge):
                self._emit(
                    "awaiting", job=command.job_index, tasks=len(command.task_ids), detail=command.detail
                )
            elif isinstance(command, sch.ReplicasSettled):
                self._store.settled(command.evidence)
                self._store.add_errors(command.pool, command.errors)
                self._emit("settled", group=command.group, outcome=command.outcome, detail=command.detail)
            elif isinstance(command, sch.FinishCampaign):
                self._emit(
                    "finished",
                    campaign=self._id,
                    done=command.done,
                    failed=command.failed,
                    unschedulable=command.unschedulable,
                    unverifiable=command.unverifiable,
                    cancelled=command.cancelled,
                )

    def _holders(self, sha256: str, peer_id: str) -> tuple[Holder, ...]:
        """Peers offered this model before (they hold it, or soon will), direct ones only: model
        bytes never cross a relay. The earliest first (the likeliest to have it); at most 16."""
        known = self._holders_of.setdefault(sha256, {})
        holders = tuple(Holder(peer_id=p, addrs=a[:8]) for p, a in known.items() if p != peer_id)[:16]
        if self._discovery.reachability(peer_id) != Reachability.RELAYED:
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
        self._floors.start(command.job_index, self._nursery, self._emit)
        if self._fleet.is_fleet(command.job_index):
            deal = self._fleet.deal(command.task_id, command.job_index, self._sched.tasks(), time.time())
            self._nursery.start_soon(self._fleet_offer, attempt, deal)
            return
        if command.spec.generate is not None and sch.draws_seed(command.spec.generate):
            attempt = self._seeded(attempt)
        if self._floors.gates(command.job_index):  # a closed loop loads at once: after the probe
            self._nursery.start_soon(self._floored, command.job_index, attempt)
            return
        self._launch(attempt)

    async def _floored(self, job_index: int, attempt: Attempt) -> None:
        await self._floors.measured(job_index)
        self._launch(attempt)

    def _seeded(self, attempt: Attempt) -> Attempt:
        """A lone open loop's offer with the seed of its planned sends, drawn here (the pure scheduler
        takes randomness as data) and kept before it goes out: its records are checked against it."""
        assert attempt.spec is not None
        assert attempt.spec.generate is not None
        seed = random.SystemRandom().randrange(2**63)
        spec = attempt.spec.with_(generate=attempt.spec.generate.with_(arrival_seed=seed))
        self._store.put_offer(self._id, attempt.task_id, attempt.peer_id, pack_body(spec))
        return replace(attempt, spec=spec)

    async def _fleet_offer(self, attempt: Attempt, deal: FleetDeal) -> None:
        """A fleet member's offer, once its clock offset is measured: its deal goes in the signed spec."""
        deal = await self._fleet.measured(deal, attempt.peer_id, attempt.addrs)
        assert attempt.spec is not None
        self._emit(
            "fleet_member",
            task=attempt.task_id,
            peer=attempt.peer_id,
            member=deal.member,
            offset_s=deal.offset_s,
            bound_s=deal.offset_bound_s,
            start_at=deal.start_at,
        )
        spec = with_deal(attempt.spec, deal)
        self._store.put_offer(
            self._id, attempt.task_id, attempt.peer_id, pack_body(spec)
        )  # before it goes out
        self._launch(replace(attempt, spec=spec))

    def _start_reclaim(self, command: sch.SendReclaim) -> None:
        """A lease granted before a restart; a fleet member's or an open loop's is checked against the
        schedule it was given (its offer spec, kept in the store when the offer went out)."""
        task = self._task(command.task_id)
        kept = self._store.offer(self._id, command.task_id, command.peer_id)
        attempt = Attempt(
            campaign_id=self._id,
            task_id=command.task_id,
            peer_id=command.peer_id,
            addrs=self._discovery.addrs(command.peer_id),
            spec=unpack_body(kept, TaskSpec) if kept is not None else None,
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
        job_index = self._task(attempt.task_id).job_index
        try:
            if not self._floors.wants(job_index):
                await run_attempt(attempt, self._me, self._open, receive, self._heard_in)
                return
            heard_send, heard_receive = trio.open_memory_channel[Heard](16)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._served, job_index, heard_receive)
                async with heard_send:
                    await run_attempt(attempt, self._me, self._open, receive, heard_send)
        finally:
            if self._inboxes.get(attempt.task_id) is send:
                del self._inboxes[attempt.task_id]
            self._idle.set()

    async def _served(self, job_index: int, heard: trio.MemoryReceiveChannel[Heard]) -> None:
        """An attempt's events passed on; a delivered result after this submitter looked at the server
        again from its own socket: probed once more where a record is under the job's floor
        (`FloorBook.again`), then its counters read where the job counts them (`FloorBook.count`), the
        rise the result is judged against with the submitter's own probes finished before the read."""
        async with heard:
            async for item in heard:
                if isinstance(item.event, Delivered):
                    await self._floors.again(job_index, item.event.body.measurement, self._emit)
                    own = self._floors.own(job_index)
                    count = await self._floors.count(job_index, self._emit)
                    if count is not None:
                        self._server_counts[item.attempt.task_id, item.event.lease_id] = (count, own)
                await self._heard_in.send(item)

    # -- events in -----------------------------------------------------------------------------

    def _translate(self, item: Heard | Injected) -> sch.Event | None:
        if isinstance(item, sch.PeersDiscovered):
            self._emit("peers", peers=sorted(p.peer_id for p in item.peers))
            return item
        if isinstance(item, sch.CancelRequested):
            return item
        if isinstance(item, sch.SubmitterStopped):
            self._stopped = True
            return item
        if isinstance(item.event, Delivered):
            return self._accept(item.attempt, item.event)
        self._observe(item.attempt, item.event)
        return item.event

    def _observe(self, a: Attempt, event: sch.Event) -> None:
        """What an attempt's event means for the holders named to others, the tally and the event lines."""
        line = event_line(event)
        if line is not None:
            self._emit(line[0], task=a.task_id, peer=a.peer_id, **line[1])
        sha = a.model.sha256 if a.model is not None else None
        match event:
            case sch.OfferCommitted() if sha is not None:
                self._fetching.add((sha, a.peer_id))
            case sch.OfferDeclined() if sha is not None and (sha, a.peer_id) not in self._fetching:
                self._forget_holder(a.peer_id, sha)
            case sch.OfferLost():
                self._forget_holder(a.peer_id)
            case sch.LeaseLapsed():
                self._forget_holder(a.peer_id)
                self.tally.lapsed += 1
                self._record("lapsed", a, event.detail)
            case sch.LeaseReleased():
                self._forget_holder(a.peer_id)
                self.tally.released += 1
                self._record("released", a, event.detail)
            case sch.ResultRejected():
                self.tally.rejected += 1
                self._record("rejected", a, event.detail)

    def _accept(self, a: Attempt, delivered: Delivered) -> sch.Event | None:
        count = self._server_counts.pop((a.task_id, delivered.lease_id), None)
        if self._sched.current_lease(a.task_id) != delivered.lease_id:
            self.tally.stale += 1
            self._record("stale", a, f"result for lease {delivered.lease_id} is stale")
            log.info("rejected a stale result for %s (lease %s)", a.task_id, delivered.lease_id)
            return None
        spec = self._campaign.jobs[self._task(a.task_id).job_index].spec
        profile = sch.placed_profile(self._sched.peers(), a.peer_id) or delivered.body.device
        job_index = self._task(a.task_id).job_index
        counted = None
        if count is not None:
            rise, own = count
            counted = Counted(rise, self._floors.accepted_before(job_index) + own)
        verdict = judge(a, delivered, spec, profile, self._floors.floor(job_index), counted)
        if isinstance(verdict, sch.ResultRejected):
            log.info("refused the result for %s: %s %s", a.task_id, verdict.reason.value, verdict.detail)
            return verdict
        if self._floors.counts(job_index):
            self._floors.accepted(job_index, sch.claimed(delivered.body.measurement))
        self._store.put_result(self._id, verdict.record)
        self.tally.accepted += 1
        self._record("accepted", a, "")
        return verdict.event

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
