"""The submitter's side of `/sark/negotiate/1.0.0`: one coroutine per task attempt.

The coroutine owns one stream and one `Conversation`. It turns what the worker says into scheduler
events, and the scheduler's commands for its task (dispatch, ack, cancel) into messages. It never
decides anything: the campaign loop feeds its events to the scheduler, which alone holds state.

The lease runs on trio's clock (monotonic; a wall-clock step cannot lapse or stretch a lease, and
tests/unit/node/submitter/test_lease_clock.py drives it on a virtual clock); the instants inside
signed messages (an offer's issue and expiry, a cancel's) are wall time, which the worker checks.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import trio

import scheduler as sch
from node.errors import NodeError
from node.p2p.host import Host
from node.p2p.wire import Channel
from protocol import (
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    DOMAIN_RELEASE,
    DOMAIN_RESULT,
    NEGOTIATE,
    Ack,
    Cancel,
    CancelBody,
    Commit,
    Decline,
    Dispatch,
    Envelope,
    Failure,
    FailureReason,
    Holder,
    ModelRef,
    Offer,
    OfferBody,
    Progress,
    ProtocolError,
    Reclaim,
    RecordError,
    Release,
    ReleaseBody,
    Result,
    ResultBody,
    TaskSpec,
)
from protocol.codec import decode
from protocol.framing import FrameDecoder
from protocol.machine import Conversation, Role, State
from protocol.records import open_envelope, seal

log = logging.getLogger(__name__)

OFFER_LIFETIME_S = 300.0
OFFER_ANSWER_S = 10.0
ARRIVING_EVERY_S = 1.0
"""How often at most a message arriving in parts is told to the scheduler (and four times a ttl)."""


@dataclass(frozen=True)
class Attempt:
    """One try of one task on one peer."""

    campaign_id: str
    task_id: str
    peer_id: str
    addrs: tuple[str, ...]
    spec: TaskSpec | None = None
    model: ModelRef | None = None
    priority: int = 50
    reclaim_lease: str | None = None
    reclaim_ttl_s: float | None = None
    holders: tuple[Holder, ...] = ()


@dataclass(frozen=True)
class Delivered:
    """A result whose signature, signer, task, lease, campaign and model all check out.

    The loop stores it and, when its lease is still the task's current one, tells the scheduler
    `ResultAccepted`: that event needs the store's answer, so the attempt cannot build it.
    """

    lease_id: str
    body: ResultBody
    envelope: Envelope


@dataclass(frozen=True)
class Heard:
    """What one attempt tells the campaign loop: the scheduler event a worker's message (or its silence)
    makes, built where the message is read, or a verified result to store."""

    attempt: Attempt
    event: sch.Event | Delivered


@dataclass(frozen=True)
class Identity:
    """Who the submitter is: what it signs with, where workers fetch its blobs, and its endpoint keys.

    `keys` maps a campaign's `api_key_env` names to the values read from the submitter's environment;
    a key leaves this process only inside the signed offer to the worker chosen for its task.
    """

    peer_id: str
    private_key: bytes = field(repr=False)
    addrs: tuple[str, ...]
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)


OpenChannel = Callable[[str, tuple[str, ...]], Awaitable[Channel]]


async def run_attempt(
    attempt: Attempt,
    me: Identity,
    open_channel: OpenChannel,
    inbox: trio.MemoryReceiveChannel[sch.Command],
    heard: trio.MemorySendChannel[Heard],
) -> None:
    """Drive one attempt from offer (or reclaim) to acknowledged outcome; report each fact as it is heard."""
    conv = Conversation(Role.SUBMITTER, attempt.task_id)
    try:
        channel = await open_channel(attempt.peer_id, attempt.addrs)
    except NodeError as exc:
        await heard.send(_lost(attempt, f"cannot open a negotiate stream: {exc}"))
        return
    async with channel:
        await _converse(attempt, me, conv, channel, inbox, heard)


async def _converse(
    attempt: Attempt,
    me: Identity,
    conv: Conversation,
    channel: Channel,
    inbox: trio.MemoryReceiveChannel[sch.Command],
    heard: trio.MemorySendChannel[Heard],
) -> None:
    try:
        await _open(attempt, me, conv, channel)
        async with trio.open_nursery() as nursery:

            async def obey() -> None:
                await _obey(attempt, me, conv, channel, inbox)
                if conv.state in (State.DONE, State.CANCELLED):  # our ack, or our cancel as the loop
                    nursery.cancel_scope.cancel()  # winds down, ended it: nothing more will be read

            nursery.start_soon(obey)
            await _read(attempt, me, conv, channel, heard)
            nursery.cancel_scope.cancel()
    except* (NodeError, ProtocolError) as group:
        await heard.send(_broken(attempt, conv, str(group.exceptions[0])))


def _lost(attempt: Attempt, detail: str) -> Heard:
    return Heard(attempt, sch.OfferLost(task_id=attempt.task_id, peer_id=attempt.peer_id, detail=detail))


def _lapsed(attempt: Attempt, lease_id: str, detail: str) -> Heard:
    return Heard(attempt, sch.LeaseLapsed(task_id=attempt.task_id, lease_id=lease_id, detail=detail))


def _broken(attempt: Attempt, conv: Conversation, detail: str) -> Heard:
    if conv.lease_id is not None:
        return _lapsed(attempt, conv.lease_id, f"stream to the worker broke: {detail}")
    return _lost(attempt, detail)


async def _open(attempt: Attempt, me: Identity, conv: Conversation, channel: Channel) -> None:
    now = time.time()  # the signed offer's instants: wall time, read by the worker's clock
    if attempt.reclaim_lease is not None:
        conv.reclaim(attempt.reclaim_lease, lease_ttl_s=attempt.reclaim_ttl_s)
        message: Offer | Reclaim = Reclaim(task_id=attempt.task_id, lease_id=attempt.reclaim_lease)
    else:
        assert attempt.spec is not None
        assert attempt.model is not None
        body = OfferBody(
            campaign_id=attempt.campaign_id,
            task_id=attempt.task_id,
            submitter=me.peer_id,
            recipient=attempt.peer_id,
            nonce=os.urandom(16),
            issued_at=now,
            expires_at=now + OFFER_LIFETIME_S,
            spec=with_key(attempt.spec, me.keys),
            model=attempt.model,
            priority=attempt.priority,
            submitter_addrs=me.addrs,
            holders=attempt.holders,
        )
        message = Offer(task_id=attempt.task_id, envelope=seal(body, DOMAIN_OFFER, me.private_key))
    await channel.send_raw(conv.send(message, trio.current_time()))


def with_key(spec: TaskSpec, keys: Mapping[str, str]) -> TaskSpec:
    """The spec as offered: its black-box endpoint's API key filled in from the submitter's keys, if it
    names one, and its metrics URL taken out (the submitter reads the server's counters itself, and
    the worker is not told where: `scheduler.verification.servercount`)."""
    generate = spec.generate
    endpoint = generate.endpoint if generate is not None else None
    if generate is None or endpoint is None:
        return spec
    if endpoint.api_key_env in keys:
        endpoint = endpoint.with_(api_key=keys[endpoint.api_key_env or ""])
    if endpoint.metrics_url is not None:
        endpoint = endpoint.with_(metrics_url=None)
    if endpoint is generate.endpoint:
        return spec
    return spec.with_(generate=generate.with_(endpoint=endpoint))


async def _obey(
    attempt: Attempt,
    me: Identity,
    conv: Conversation,
    channel: Channel,
    inbox: trio.MemoryReceiveChannel[sch.Command],
) -> None:
    """Turn the scheduler's commands for this task into messages, until our ack ends the conversation."""
    async for command in inbox:
        now = trio.current_time()
        if isinstance(command, sch.SendDispatch):
            await channel.send_raw(
                conv.send(Dispatch(task_id=attempt.task_id, lease_id=command.lease_id), now)
            )
        elif isinstance(command, sch.SendAck):
            await channel.send_raw(conv.send(Ack(task_id=attempt.task_id, lease_id=command.lease_id), now))
            return  # the ack ends the conversation
        elif isinstance(command, sch.SendCancel) and conv.state in _CANCELLABLE:
            cancel = _cancel(attempt, me, command.lease_id, command.reason, time.time())
            await channel.send_raw(conv.send(cancel, now))


_CANCELLABLE = frozenset({State.OFFERED, State.COMMITTED, State.RUNNING})


def _cancel(attempt: Attempt, me: Identity, lease_id: str | None, reason: str, now: float) -> Cancel:
    body = CancelBody(
        task_id=attempt.task_id,
        lease_id=lease_id,
        recipient=attempt.peer_id,
        nonce=os.urandom(16),
        issued_at=now,
        expires_at=now + 60,
        reason=reason[:2000],
    )
    return Cancel(
        task_id=attempt.task_id, lease_id=lease_id, envelope=seal(body, DOMAIN_CANCEL, me.private_key)
    )


_ENDED = frozenset(
    {State.DONE, State.DECLINED, State.FAILED, State.CANCELLED, State.RELEASED, State.LEASE_LOST}
)


async def _read(
    attempt: Attempt, me: Identity, conv: Conversation, channel: Channel, heard: trio.MemorySendChannel[Heard]
) -> None:
    """Read until the conversation ends; a lapsed lease ends it too, and a zombie's late result is stale.

    Any bytes heard on a leased stream keep the lease (`Conversation.receive_data`): the scheduler hears
    of a message in part as `MessageArriving`, at most every `ARRIVING_EVERY_S` (or ttl / 4)."""
    told = -math.inf
    while conv.state not in _ENDED:
        deadline = conv.next_deadline()
        # A lease holds at its deadline and is lost past it: wait to the first instant past it (on a
        # virtual clock, waking at the deadline itself would read "not yet" and loop without time moving).
        until = math.inf if deadline is None else math.nextafter(deadline, math.inf)
        if conv.lease_id is None:
            until = trio.current_time() + OFFER_ANSWER_S
        data: bytes | None = None
        with trio.move_on_at(until):
            data = await channel.receive_raw(timeout=math.inf)
        if data is None and conv.lease_id is None:
            raise NodeError(f"no answer to the offer within {OFFER_ANSWER_S:g} s")
        if data is None:
            if conv.tick(trio.current_time()) == State.LEASE_LOST and conv.lease_id is not None:
                await heard.send(_lapsed(attempt, conv.lease_id, "no heartbeat before the lease deadline"))
                await _drain_zombie(attempt, me, channel, heard)
            continue
        if not data:
            if conv.state in _ENDED:
                return
            raise NodeError(f"{attempt.peer_id} closed the stream")
        now = trio.current_time()
        conv.receive_data(data, now)
        whole = False
        while (message := conv.next_event(trio.current_time())) is not None:
            whole = True
            await heard.send(Heard(attempt, _event(attempt, me, message)))
        every = min(ARRIVING_EVERY_S, (conv.lease_ttl_s or math.inf) / 4)
        if not whole and conv.lease_id is not None and now - told >= every:
            told = now  # part of a message: the scheduler's lease hears it too, a few times a ttl at most
            await heard.send(Heard(attempt, sch.MessageArriving(attempt.task_id, conv.lease_id)))


async def _drain_zombie(
    attempt: Attempt, me: Identity, channel: Channel, heard: trio.MemorySendChannel[Heard]
) -> None:
    """After a lapse a frozen worker may wake and send its result: report it (the loop rejects it)."""
    decoder = FrameDecoder()
    while data := await channel.receive_raw(timeout=None):
        decoder.feed(data)
        while (frame := decoder.next_frame()) is not None:
            message = decode(frame)
            if isinstance(message, Result):
                await heard.send(Heard(attempt, verify_result(attempt, me, message)))
                return


def _event(attempt: Attempt, me: Identity, message: object) -> sch.Event | Delivered:
    """The scheduler event a worker's message makes (a result: once its checks pass, a `Delivered`)."""
    task, peer = attempt.task_id, attempt.peer_id
    match message:
        case Commit(lease_id=lease, queue_position=queue, lease_ttl_s=ttl):
            return sch.OfferCommitted(task, peer, lease, queue_position=queue, lease_ttl_s=ttl)
        case Decline(reason=reason, detail=detail):
            return sch.OfferDeclined(task, peer, reason, detail)
        case Progress(lease_id=lease, phase=phase, done=done, total=total):
            return sch.ProgressReported(
                task,
                lease,
                phase,
                done=done,
                total=total,
                median_ms=message.median_ms,
                queue_position=message.queue_position,
            )
        case Failure(lease_id=lease, reason=reason, detail=detail):
            return sch.TaskFailedRemotely(task, lease, reason, detail, stage=message.stage)
        case Result():
            return verify_result(attempt, me, message)
        case Release():
            return verify_release(attempt, me, message)
    raise NodeError(f"unexpected {type(message).__name__} from {peer}")


def verify_result(attempt: Attempt, me: Identity, result: Result) -> Delivered | sch.ResultRejected:
    """Check a result's signature and that it is the result of this task, lease, campaign and model."""
    try:
        body = open_envelope(
            result.envelope, DOMAIN_RESULT, ResultBody, now=time.time(), signer=attempt.peer_id
        )
    except RecordError as exc:
        if exc.reason == "malformed":  # signed by the worker, but no measurement fits the schema
            return _rejected(attempt, result, f"result body: {exc.detail}", FailureReason.INVALID)
        return _rejected(attempt, result, f"result signature: {exc.detail}")
    expected = {
        "task": (body.task_id, attempt.task_id),
        "lease": (body.lease_id, result.lease_id),
        "campaign": (body.campaign_id, attempt.campaign_id),
        "submitter": (body.submitter, me.peer_id),
    }
    if attempt.model is not None:
        expected["model"] = (body.model_sha256, attempt.model.sha256)
    wrong = [name for name, (got, want) in expected.items() if got != want]
    if wrong:
        return _rejected(attempt, result, f"result names the wrong {', '.join(wrong)}")
    return Delivered(result.lease_id, body, result.envelope)


def verify_release(attempt: Attempt, me: Identity, release: Release) -> sch.LeaseReleased | sch.LeaseLapsed:
    """A leaving worker's release, once its signature, signer, task, lease, campaign and recipient check out;
    one that does not is taken for what it is: the worker stopped working on the lease (a lapse)."""
    try:
        body = open_envelope(
            release.envelope, DOMAIN_RELEASE, ReleaseBody, now=time.time(), signer=attempt.peer_id
        )
    except RecordError as exc:
        return sch.LeaseLapsed(attempt.task_id, release.lease_id, f"release refused: {exc.detail}")
    expected = {
        "task": (body.task_id, attempt.task_id),
        "lease": (body.lease_id, release.lease_id),
        "campaign": (body.campaign_id, attempt.campaign_id),
        "submitter": (body.submitter, me.peer_id),
    }
    wrong = [name for name, (got, want) in expected.items() if got != want]
    if wrong:
        detail = f"release refused: it names the wrong {', '.join(wrong)}"
        return sch.LeaseLapsed(attempt.task_id, release.lease_id, detail)
    return sch.LeaseReleased(attempt.task_id, release.lease_id, attempt.peer_id, body.reason)


def _rejected(
    attempt: Attempt, result: Result, detail: str, reason: FailureReason = FailureReason.INTERNAL
) -> sch.ResultRejected:
    return sch.ResultRejected(attempt.task_id, result.lease_id, attempt.peer_id, detail, reason)


async def open_negotiate(host: Host, peer_id: str, addrs: tuple[str, ...]) -> Channel:
    """Open a negotiate stream with the node's host (direct first, then through a relay)."""
    return await host.open_channel(peer_id, NEGOTIATE, addrs=addrs, read_timeout=math.inf)
