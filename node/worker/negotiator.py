"""The worker's side of `/sark/negotiate/1.0.0`: who may offer, what it takes, and the lease.

One stream per task. The offer is checked against the Noise-authenticated peer id of the stream
(never a message field), its signature, recipient, expiry and nonce; then against what this device
can do. A commit grants a lease; progress messages are the heartbeats that keep it alive; the
result is signed and kept in the outbox until the submitter acknowledges it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import final

import trio

from node.errors import NodeError
from node.events import EventSink, quiet
from node.p2p.wire import Channel
from node.worker.admission import OfferPolicy, WorkerLoad, admit
from node.worker.job import Job
from node.worker.runner import Runner
from protocol import (
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    Ack,
    Cancel,
    CancelBody,
    Commit,
    Decline,
    DeclineReason,
    DeviceProfile,
    Dispatch,
    Failure,
    FailureReason,
    NegotiateMessage,
    Offer,
    OfferBody,
    Progress,
    Reclaim,
    RecordError,
    Release,
    RemoteProtocolError,
)
from protocol.codec import decode
from protocol.framing import FrameDecoder
from protocol.machine import Conversation, Role
from protocol.records import NonceCache, open_envelope

log = logging.getLogger(__name__)


@final
class Negotiator:
    """Serves `/sark/negotiate/1.0.0` for one worker."""

    def __init__(
        self,
        *,
        peer_id: str,
        profile: DeviceProfile,
        runner: Runner,
        policy: OfferPolicy,
        is_relayed: Callable[[str], bool],
        has_model: Callable[[str], bool],
        events: EventSink = quiet,
        live: Callable[[], DeviceProfile] | None = None,
    ) -> None:
        self._peer_id = peer_id
        self._profile = profile
        self._live = live or (lambda: profile)  # the profile now: declared servers are probed again
        self._runner = runner
        self._policy = policy
        self._is_relayed = is_relayed
        self._has_model = has_model
        self._nonces = NonceCache(policy.nonce_capacity, share=policy.nonce_share)
        self._emit = events

    async def handle(self, channel: Channel) -> None:
        """One negotiate stream, from the first message to the acknowledged outcome.

        Junk, a peer gone or late, a move the conversation does not allow: the error escapes to
        `node.p2p.stream.run_handler`, which logs it and resets the stream (as on every protocol).
        """
        conv, first = await self._open(channel)
        if isinstance(first, Offer):
            job = await self._answer_offer(channel, conv, first)
        elif isinstance(first, Reclaim):
            job = await self._answer_reclaim(channel, conv, first)
        else:  # the conversation machine lets only an offer or a reclaim open a stream
            raise RemoteProtocolError(f"a negotiate stream cannot open with {first.kind}")
        if job is not None:
            await self._follow(channel, conv, job)

    async def _open(self, channel: Channel) -> tuple[Conversation, NegotiateMessage]:
        decoder, seen = FrameDecoder(), b""
        with trio.fail_after(self._policy.first_message_s):
            while (frame := decoder.next_frame()) is None:
                data = await channel.receive_raw()
                if not data:
                    raise NodeError(f"{channel.peer_id} closed the negotiate stream before a message")
                seen += data
                decoder.feed(data)
        first = decode(frame)
        conv = Conversation(Role.WORKER, getattr(first, "task_id", "?"))
        conv.receive_data(seen)
        event = conv.next_event(time.time())
        assert event is not None
        return conv, event

    # -- offers -----------------------------------------------------------------------------------

    async def _answer_offer(self, channel: Channel, conv: Conversation, offer: Offer) -> Job | None:
        body, refusal = self._judge(channel.peer_id, offer)
        now = time.time()
        if refusal is not None:
            reason, detail = refusal
            log.info("declined %s from %s: %s (%s)", offer.task_id, channel.peer_id, reason, detail)
            self._emit(
                "declined", task=offer.task_id, submitter=channel.peer_id, reason=reason.value, detail=detail
            )
            await channel.send_raw(
                conv.send(Decline(task_id=offer.task_id, reason=reason, detail=detail), now)
            )
            return None
        assert body is not None
        job = self._runner.commit(body)
        commit = Commit(
            task_id=offer.task_id,
            lease_id=job.lease_id,
            lease_ttl_s=self._policy.lease_ttl_s,
            queue_position=self._runner.queue_position(job),
        )
        await channel.send_raw(conv.send(commit, now))
        self._emit("committed", task=offer.task_id, submitter=channel.peer_id, lease=job.lease_id)
        return job

    def _judge(
        self, submitter: str, offer: Offer
    ) -> tuple[OfferBody | None, tuple[DeclineReason, str] | None]:
        policy = self._policy
        if not policy.open_mode and submitter not in policy.allow:
            return None, (DeclineReason.POLICY, f"submitter {submitter} is not allowed on this worker")
        now = time.time()
        try:
            body = open_envelope(
                offer.envelope,
                DOMAIN_OFFER,
                OfferBody,
                now=now,
                signer=submitter,
                max_lifetime_s=policy.max_offer_lifetime_s,
            )
        except RecordError as exc:
            if exc.reason == "lifetime":  # refused before its nonce could take a place in the cache
                return None, (DeclineReason.LIFETIME, f"offer {exc.detail}")
            return None, (DeclineReason.BAD_OFFER, f"offer signature: {exc.detail}")
        if body.task_id != offer.task_id or body.recipient != self._peer_id:
            return None, (DeclineReason.BAD_OFFER, "offer is addressed to another peer or task")
        if not self._nonces.has_room(submitter, now):
            held = self._nonces.held_by(submitter)
            return None, (
                DeclineReason.BUSY,
                f"{held} offers of this submitter are still within their lifetime",
            )
        if not self._nonces.check_and_add(submitter, body.nonce, body.expires_at, now):
            return None, (DeclineReason.BAD_OFFER, "replayed offer (nonce already seen)")
        return body, self._fit(submitter, body)

    def _fit(self, submitter: str, body: OfferBody) -> tuple[DeclineReason, str] | None:
        stranger = self._policy.open_mode and bool(self._policy.allow) and submitter not in self._policy.allow
        load = WorkerLoad(
            has_room=self._runner.has_room(keep=int(stranger)),  # the allowed submitters' last place
            has_model=self._has_model(body.model.sha256),
            submitter_relayed=self._is_relayed(submitter),
            leaving=self._runner.leaving,
        )
        refusal = admit(body, self._live(), self._policy, load)
        return None if refusal is None else (refusal.reason, refusal.detail)

    # -- reclaim after a submitter restart ---------------------------------------------------------

    async def _answer_reclaim(self, channel: Channel, conv: Conversation, reclaim: Reclaim) -> Job | None:
        job = self._runner.job(reclaim.lease_id)
        if job is not None and job.offer.submitter == channel.peer_id:
            self._emit(
                "reclaimed", task=reclaim.task_id, lease=reclaim.lease_id, done=job.outcome is not None
            )
            self._runner.dispatch(job)  # a reclaimed lease means "go on": it may have been waiting
            return job
        stored = self._runner.stored(reclaim.task_id, reclaim.lease_id)
        now = time.time()
        if stored is not None and stored.envelope.peer_id == self._peer_id:
            self._emit("redelivered", task=reclaim.task_id, lease=reclaim.lease_id)
            await channel.send_raw(conv.send(stored, now))
            await self._await_ack_stored(channel, conv, reclaim)
            return None
        failure = Failure(
            task_id=reclaim.task_id,
            lease_id=reclaim.lease_id,
            reason=FailureReason.UNKNOWN_LEASE,
            detail="this worker holds nothing for that lease",
        )
        await channel.send_raw(conv.send(failure, now))
        return None

    async def _await_ack_stored(self, channel: Channel, conv: Conversation, reclaim: Reclaim) -> None:
        for message in await self._receive(channel, conv, timeout=self._policy.first_message_s):
            if isinstance(message, Ack):
                self._runner.forget(reclaim.task_id, reclaim.lease_id)

    # -- after the commit --------------------------------------------------------------------------

    async def _follow(self, channel: Channel, conv: Conversation, job: Job) -> None:
        """Heartbeats out, dispatch/cancel/ack in, then the outcome, until acknowledged.

        Two waits are bounded by what an honest submitter does, not by the submitter's word: the
        dispatch (sent as it reads the commit) within `dispatch_s`, else the place is given back at
        once; the ack of an outcome within `ack_s`, else the stream ends (a result stays in the outbox
        for a reclaim). The cheater's view: on an `--open` worker a stranger's offer is committed like
        anyone's; it chooses to send nothing after the commit, or nothing after the outcome, and held a
        queue place (one of `max_queue` + 1) or a stream, and so its connection, for as long as it
        kept the stream open. It now holds a place `dispatch_s` a commit and a stream past an outcome
        `ack_s`. What stays its choice: offers are free to sign, so keys that offer again each
        `dispatch_s` keep the strangers' places full; the last place is the allowed submitters'
        (`_fit`), so the owner's own campaigns are never denied by strangers.
        """
        wait = math.inf if job.dispatched else self._policy.dispatch_s  # a reclaim's is dispatched
        listen = trio.CancelScope(deadline=trio.current_time() + wait)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats, channel, conv, job, nursery.cancel_scope, listen)
                with listen:
                    await self._listen(channel, conv, job, listen)
                if listen.cancelled_caught:
                    raise NodeError(self._overdue(channel.peer_id, job))
                nursery.cancel_scope.cancel()
        finally:
            if not job.dispatched and listen.cancelled_caught and job.outcome is None:
                self._runner.drop(job)  # the stream is alive and sent no dispatch: no reclaim to wait for
            elif not job.dispatched:
                self._runner.orphan(job, self._policy.lease_ttl_s)

    def _overdue(self, submitter: str, job: Job) -> str:
        """Why a stream ended on a deadline (`_follow`), said in the log and as an event."""
        if job.outcome is None:
            why = f"no dispatch within {self._policy.dispatch_s:g} s of the commit: its place is given back"
            self._emit("undispatched", task=job.task_id, submitter=submitter, lease=job.lease_id)
        else:
            why = f"no ack within {self._policy.ack_s:g} s of the outcome: the stream ends"
            self._emit("unacknowledged", task=job.task_id, submitter=submitter, lease=job.lease_id)
        return f"task {job.task_id} from {submitter}: {why}"

    async def _heartbeats(
        self,
        channel: Channel,
        conv: Conversation,
        job: Job,
        scope: trio.CancelScope,
        listen: trio.CancelScope,
    ) -> None:
        while job.outcome is None:
            with trio.move_on_after(self._policy.heartbeat_s):
                await job.finished.wait()
            if job.outcome is not None:
                break
            progress = Progress(
                task_id=job.task_id,
                lease_id=job.lease_id,
                phase=job.phase,
                done=job.done,
                total=job.total,
                queue_position=self._runner.queue_position(job),
                median_ms=job.median_ms,
            )
            await channel.send_raw(conv.send(progress, time.time()))
        assert job.outcome is not None
        await channel.send_raw(conv.send(job.outcome, time.time()))
        job.sent.set()
        if isinstance(job.outcome, Release):  # final: no ack follows, the stream ends here
            scope.cancel()
        listen.deadline = trio.current_time() + self._policy.ack_s

    async def _listen(self, channel: Channel, conv: Conversation, job: Job, listen: trio.CancelScope) -> None:
        while True:
            for message in await self._receive(channel, conv, timeout=math.inf):
                if isinstance(message, Dispatch):
                    self._runner.dispatch(job)
                    if job.outcome is None:  # the measurement's own timeout bounds it from here
                        listen.deadline = math.inf
                elif isinstance(message, Cancel):
                    self._on_cancel(channel.peer_id, message, job)
                elif isinstance(message, Ack):
                    self._runner.acknowledged(job)
                    return

    def _on_cancel(self, submitter: str, message: Cancel, job: Job) -> None:
        now = time.time()
        try:
            body = open_envelope(
                message.envelope,
                DOMAIN_CANCEL,
                CancelBody,
                now=now,
                signer=submitter,
                max_lifetime_s=self._policy.max_offer_lifetime_s,
            )
        except RecordError as exc:
            log.warning("ignored a cancel for %s: %s", job.task_id, exc.detail)
            return
        if body.recipient != self._peer_id or body.task_id != job.task_id:
            log.warning("ignored a misdirected cancel for %s", job.task_id)
            return
        if not self._nonces.check_and_add(submitter, body.nonce, body.expires_at, now):
            log.warning("ignored a replayed cancel for %s", job.task_id)
            return
        self._runner.cancel(job)

    async def _receive(
        self, channel: Channel, conv: Conversation, *, timeout: float
    ) -> list[NegotiateMessage]:
        data = await channel.receive_raw(timeout=timeout)
        if not data:
            raise NodeError(f"{channel.peer_id} closed the negotiate stream")
        conv.receive_data(data)
        out = []
        while (message := conv.next_event(time.time())) is not None:
            out.append(message)
        return out


__all__ = ["Negotiator", "OfferPolicy"]
