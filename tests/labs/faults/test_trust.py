"""Issue 6 trust, in memory: the worker's Negotiator against hand-made signed offers and cancels, and
the submitter's result check against a tampered result.

The Negotiator is the real one over `memory_channel_pair`; the stream's peer id plays the
Noise-authenticated peer id. Its runner is real but never started, so nothing it commits runs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import scheduler as sch
from node.errors import NodeError
from node.events import EventSink
from node.p2p.wire import Channel, memory_channel_pair
from node.submitter.attempt import Attempt, Delivered, Identity, verify_result
from node.transfer.cache import ModelCache
from node.transfer.fetch import UrlPolicy
from node.worker.negotiator import Negotiator, OfferPolicy
from node.worker.outbox import Outbox
from node.worker.runner import Runner
from protocol import (
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    DOMAIN_RESULT,
    Cancel,
    CancelBody,
    Commit,
    ComputeUnit,
    Decline,
    DeclineReason,
    DeviceProfile,
    Dispatch,
    Envelope,
    Failure,
    FailureReason,
    Measurement,
    ModelRef,
    Offer,
    OfferBody,
    Progress,
    Result,
    ResultBody,
    Stats,
    TaskSpec,
    UnitStatus,
)
from protocol.records import open_envelope, peer_id_from_public_key, public_key_of, seal

MODEL = ModelRef(name="m.onnx", size=10, sha256="a" * 64, sources=("https://example.invalid/m.onnx",))


@dataclass(frozen=True)
class Key:
    seed: bytes
    peer_id: str


def _key() -> Key:
    seed = os.urandom(32)
    return Key(seed, peer_id_from_public_key(public_key_of(seed)))


def _profile() -> DeviceProfile:
    return DeviceProfile(
        device_name="trust-lab", soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024,
        os="Linux", os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
    )  # fmt: skip


def offer(
    sub: Key,
    recipient: str,
    *,
    task: str = "t1",
    issued: float | None = None,
    nonce: bytes = b"",
    lifetime: float = 60,
    spec: TaskSpec | None = None,
) -> Offer:
    """A signed offer; `issued` in the past makes an expired one."""
    now = time.time() if issued is None else issued
    body = OfferBody(
        campaign_id="c1", task_id=task, submitter=sub.peer_id, recipient=recipient,
        nonce=nonce or os.urandom(16), issued_at=now, expires_at=now + lifetime,
        spec=spec or TaskSpec(compute_unit=ComputeUnit.CPU_ONNX), model=MODEL,
    )  # fmt: skip
    return Offer(task_id=task, envelope=seal(body, DOMAIN_OFFER, sub.seed))


def cancel(sub: Key, recipient: str, lease: str, *, task: str = "t1", issued: float | None = None) -> Cancel:
    """A signed cancel."""
    now = time.time() if issued is None else issued
    body = CancelBody(
        task_id=task, lease_id=lease, recipient=recipient, nonce=os.urandom(16),
        issued_at=now, expires_at=now + 60, reason="test",
    )  # fmt: skip
    return Cancel(task_id=task, lease_id=lease, envelope=seal(body, DOMAIN_CANCEL, sub.seed))


@dataclass
class Worker:
    """A Negotiator (and its idle runner) with the events it emitted."""

    key: Key
    negotiator: Negotiator
    runner: Runner
    nursery: trio.Nursery
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def stream(self, submitter: str) -> Channel:
        """Open a negotiate stream from `submitter` (as the Noise layer would authenticate it)."""
        mine, theirs = memory_channel_pair(submitter, self.key.peer_id)
        self.nursery.start_soon(self._serve, theirs)
        return mine

    async def _serve(self, channel: Channel) -> None:
        try:
            await self.negotiator.handle(channel)
        except* (NodeError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the submitter side closed: what the host's handler wrapper contains

    async def ask(self, submitter: str, message: Offer) -> Any:
        """Send one offer on a fresh stream; return the answer."""
        channel = await self.stream(submitter)
        await channel.send(message)
        reply = await channel.receive(timeout=10)
        await channel.close()
        return reply


@pytest.fixture
async def worker(tmp_path: Path, nursery: trio.Nursery) -> Worker:
    key = _key()
    events: list[tuple[str, dict[str, Any]]] = []

    def sink(event: str, /, **fields: Any) -> None:
        events.append((event, fields))

    runner = Runner(
        peer_id=key.peer_id, private_key=key.seed, profile=_profile(), cache=ModelCache(tmp_path / "cache"),
        outbox=Outbox(tmp_path / "outbox"), policy=UrlPolicy(), open_blob=_no_blob, events=sink,
    )  # fmt: skip
    return Worker(key, _negotiator(key, runner, sink, ALLOWED.peer_id), runner, nursery, events)


async def _no_blob(peer: str, addrs: tuple[str, ...]) -> Channel:
    raise AssertionError("nothing may be fetched")


def _negotiator(key: Key, runner: Runner, sink: EventSink, allow: str) -> Negotiator:
    return Negotiator(
        peer_id=key.peer_id, profile=_profile(), runner=runner,
        policy=OfferPolicy(allow=frozenset({allow}), heartbeat_s=0.2, lease_ttl_s=5),
        is_relayed=lambda _: False, has_model=lambda _: False, events=sink,
    )  # fmt: skip


ALLOWED = _key()


async def test_a_valid_offer_from_the_allowed_submitter_is_committed(worker: Worker) -> None:
    reply = await worker.ask(ALLOWED.peer_id, offer(ALLOWED, worker.key.peer_id))
    assert isinstance(reply, Commit)


async def test_an_offer_from_a_peer_not_allowed_is_declined_for_policy(worker: Worker) -> None:
    stranger = _key()
    reply = await worker.ask(stranger.peer_id, offer(stranger, worker.key.peer_id))
    assert isinstance(reply, Decline)
    assert reply.reason == DeclineReason.POLICY
    assert stranger.peer_id in reply.detail
    assert not [e for e, _ in worker.events if e in ("committed", "model", "run")]


async def test_the_stream_peer_decides_not_the_signed_submitter_field(worker: Worker) -> None:
    """A stranger relaying an offer the allowed submitter signed is still the stranger (Noise peer id)."""
    reply = await worker.ask(_key().peer_id, offer(ALLOWED, worker.key.peer_id))
    assert isinstance(reply, Decline)
    assert reply.reason == DeclineReason.POLICY


async def test_an_offer_signed_by_another_key_is_declined(worker: Worker) -> None:
    forged = offer(_key(), worker.key.peer_id)
    reply = await worker.ask(ALLOWED.peer_id, forged)
    assert isinstance(reply, Decline)
    assert reply.reason == DeclineReason.BAD_OFFER


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("expired", lambda w: offer(ALLOWED, w, issued=time.time() - 600)),
        ("misdirected", lambda w: offer(ALLOWED, _key().peer_id)),
        ("tampered", lambda w: _flip(offer(ALLOWED, w))),
    ],
)
async def test_expired_misdirected_and_tampered_offers_are_declined(
    worker: Worker, case: str, make: Any
) -> None:
    reply = await worker.ask(ALLOWED.peer_id, make(worker.key.peer_id))
    assert isinstance(reply, Decline), case
    assert reply.reason == DeclineReason.BAD_OFFER, (case, reply.detail)


async def test_a_replayed_offer_is_declined(worker: Worker) -> None:
    original = offer(ALLOWED, worker.key.peer_id)
    assert isinstance(await worker.ask(ALLOWED.peer_id, original), Commit)
    reply = await worker.ask(ALLOWED.peer_id, original)
    assert isinstance(reply, Decline)
    assert reply.reason == DeclineReason.BAD_OFFER
    assert "replayed" in reply.detail


def _flip(message: Offer) -> Offer:
    """One changed byte in the signed payload."""
    payload = bytearray(message.envelope.payload)
    payload[len(payload) // 2] ^= 0x01
    envelope = message.envelope.with_(payload=bytes(payload))
    return message.with_(envelope=envelope)


async def _committed(worker: Worker, task: str = "t1") -> tuple[Channel, str]:
    channel = await worker.stream(ALLOWED.peer_id)
    await channel.send(offer(ALLOWED, worker.key.peer_id, task=task))
    commit = await channel.receive(timeout=10)
    assert isinstance(commit, Commit)
    return channel, commit.lease_id


async def _outcome(channel: Channel) -> Any:
    while isinstance(message := await channel.receive(timeout=10), Progress):
        pass
    return message


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("misdirected", lambda me, lease: cancel(ALLOWED, _key().peer_id, lease)),
        ("expired", lambda me, lease: cancel(ALLOWED, me, lease, issued=time.time() - 600)),
        ("forged", lambda me, lease: cancel(_key(), me, lease)),
    ],
)
async def test_a_bad_cancel_is_ignored(worker: Worker, case: str, make: Any) -> None:
    channel, lease = await _committed(worker)
    await channel.send(make(worker.key.peer_id, lease))
    await trio.testing.wait_all_tasks_blocked()
    job = worker.runner.job(lease)
    assert job is not None, case
    assert job.outcome is None, case
    assert not job.cancel.is_set(), case
    assert isinstance(await channel.receive(timeout=10), Progress), case  # the lease lives on


async def test_a_valid_cancel_cancels_and_its_replay_is_ignored(worker: Worker) -> None:
    channel, lease = await _committed(worker)
    valid = cancel(ALLOWED, worker.key.peer_id, lease)
    await channel.send(valid)
    failure = await _outcome(channel)
    assert isinstance(failure, Failure)
    assert failure.reason == FailureReason.CANCELLED
    outcomes = [fields for name, fields in worker.events if name == "outcome"]  # it never ran; it is said
    assert outcomes == [{"task": "t1", "lease": lease, "kind": failure.kind, "reason": "cancelled",
                         "detail": "cancelled by the submitter"}]  # fmt: skip

    again, lease2 = await _committed(worker)  # the same task offered again: the old cancel replayed
    await again.send(valid.with_(lease_id=lease2))
    await trio.testing.wait_all_tasks_blocked()
    job = worker.runner.job(lease2)
    assert job is not None
    assert job.outcome is None
    assert not job.cancel.is_set()


def _measurement() -> Measurement:
    stats = Stats(n=3, min=1, max=3, mean=2, median=2, stddev=1, p90=3, p95=3, p99=3, cv=0.5)
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=stats, load_first_ms=4.0, first_inference_ms=3.0,
        warmups_used=1, inference_ms=stats, peak_load_ram_mb=10.0, peak_inference_ram_mb=11.0,
        cpu_cores_used=1.0,
    )  # fmt: skip


def _signed_result(worker: Key, submitter: Key, lease: str) -> Result:
    body = ResultBody(
        campaign_id="c1", task_id="t1", lease_id=lease, worker=worker.peer_id, submitter=submitter.peer_id,
        model_sha256=MODEL.sha256, device=_profile(), measurement=_measurement(), finished_at=time.time(),
    )  # fmt: skip
    return Result(task_id="t1", lease_id=lease, envelope=seal(body, DOMAIN_RESULT, worker.seed))


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_result_with_one_changed_byte_is_rejected(where: str) -> None:
    wkey, me = _key(), _key()
    attempt = Attempt(campaign_id="c1", task_id="t1", peer_id=wkey.peer_id, addrs=(), model=MODEL)
    identity = Identity(peer_id=me.peer_id, private_key=me.seed, addrs=())
    result = _signed_result(wkey, me, "L1")
    assert isinstance(verify_result(attempt, identity, result), Delivered)  # the untouched one passes

    payload = bytearray(result.envelope.payload)
    payload[{"start": 0, "middle": len(payload) // 2, "end": len(payload) - 1}[where]] ^= 0x01
    tampered = result.with_(envelope=_with_payload(result.envelope, bytes(payload)))
    verdict = verify_result(attempt, identity, tampered)
    assert isinstance(verdict, sch.ResultRejected)
    assert "signature" in verdict.detail


def test_a_result_signed_by_another_worker_or_for_another_lease_is_rejected() -> None:
    wkey, me, other = _key(), _key(), _key()
    attempt = Attempt(campaign_id="c1", task_id="t1", peer_id=wkey.peer_id, addrs=(), model=MODEL)
    identity = Identity(peer_id=me.peer_id, private_key=me.seed, addrs=())
    assert isinstance(verify_result(attempt, identity, _signed_result(other, me, "L1")), sch.ResultRejected)
    moved = _signed_result(wkey, me, "L1").with_(lease_id="L2")
    verdict = verify_result(attempt, identity, moved)
    assert isinstance(verdict, sch.ResultRejected)
    assert "lease" in verdict.detail


def _with_payload(envelope: Envelope, payload: bytes) -> Envelope:
    return envelope.with_(payload=payload)


def test_a_signed_body_that_no_measurement_fits_is_rejected_invalid() -> None:
    wkey, me = _key(), _key()
    attempt = Attempt(campaign_id="c1", task_id="t1", peer_id=wkey.peer_id, addrs=(), model=MODEL)
    identity = Identity(peer_id=me.peer_id, private_key=me.seed, addrs=())
    honest = _signed_result(wkey, me, "L1")
    body = open_envelope(honest.envelope, DOMAIN_RESULT, ResultBody, now=time.time())
    bad = body.with_(measurement=body.measurement.with_(peak_load_ram_mb=-1.0))  # with_ does not validate
    result = honest.with_(envelope=seal(bad, DOMAIN_RESULT, wkey.seed))  # signed by the worker's own key
    verdict = verify_result(attempt, identity, result)
    assert isinstance(verdict, sch.ResultRejected)
    assert verdict.reason == FailureReason.INVALID
    assert "peak_load_ram_mb" in verdict.detail
    forged = verify_result(attempt, identity, _signed_result(_key(), me, "L1"))
    assert isinstance(forged, sch.ResultRejected)
    assert forged.reason == FailureReason.INTERNAL  # a signature that does not check out stays internal


async def test_an_offer_valid_for_a_year_is_declined_for_lifetime_and_its_nonce_is_not_kept(
    worker: Worker,
) -> None:
    nonce = os.urandom(16)
    year = offer(ALLOWED, worker.key.peer_id, nonce=nonce, lifetime=365 * 86_400)
    reply = await worker.ask(ALLOWED.peer_id, year)
    assert isinstance(reply, Decline)
    assert reply.reason == DeclineReason.LIFETIME, reply.detail
    # the nonce was not remembered: the same nonce in an offer of a sane lifetime is no replay
    assert isinstance(
        await worker.ask(ALLOWED.peer_id, offer(ALLOWED, worker.key.peer_id, nonce=nonce)), Commit
    )


async def test_one_submitter_flooding_offers_cannot_lock_out_another(worker: Worker, tmp_path: Path) -> None:
    """Far-future offers take no place; valid ones fill only the flooder's share; the other commits."""
    flooder, honest = _key(), _key()
    allow = frozenset({flooder.peer_id, honest.peer_id})
    shared = Negotiator(
        peer_id=worker.key.peer_id, profile=_profile(), runner=worker.runner,
        policy=OfferPolicy(allow=allow, nonce_capacity=9, nonce_share=8),
        is_relayed=lambda _: False, has_model=lambda _: False,
    )  # fmt: skip
    worker.negotiator = shared
    far = [offer(flooder, worker.key.peer_id, task=f"f{i}", lifetime=1e12) for i in range(100)]
    assert {(await worker.ask(flooder.peer_id, o)).reason for o in far} == {DeclineReason.LIFETIME}
    # valid offers with fresh nonces up to its share (for a unit this worker lacks: none is queued)
    gpu = TaskSpec(compute_unit=ComputeUnit.GPU_ONNX)
    fill = [offer(flooder, worker.key.peer_id, task=f"v{i}", spec=gpu) for i in range(12)]
    reasons = [(await worker.ask(flooder.peer_id, o)).reason for o in fill]
    assert reasons[:8] == [DeclineReason.UNSUPPORTED_UNIT] * 8
    assert reasons[8:] == [DeclineReason.BUSY] * 4  # its share is full: declined before its nonce
    assert isinstance(await worker.ask(honest.peer_id, offer(honest, worker.key.peer_id)), Commit)


def _open_worker(worker: Worker, policy: OfferPolicy | None = None) -> None:
    """`worker` as `join --open --allow ALLOWED` serves it: strangers' offers are taken too."""
    policy = dataclasses.replace(
        policy or OfferPolicy(), allow=frozenset({ALLOWED.peer_id}), open_mode=True, heartbeat_s=0.2
    )
    worker.negotiator = Negotiator(
        peer_id=worker.key.peer_id, profile=_profile(), runner=worker.runner, policy=policy,
        is_relayed=lambda _: False, has_model=lambda _: False,
        events=lambda event, /, **fields: worker.events.append((event, fields)),
    )  # fmt: skip


async def _commit(worker: Worker, who: Key, task: str) -> tuple[Channel, Any]:
    """An offer of `who`'s on a stream it keeps open: the stream and the worker's answer."""
    channel = await worker.stream(who.peer_id)
    await channel.send(offer(who, worker.key.peer_id, task=task))
    return channel, await channel.receive(timeout=10)


async def test_strangers_commits_left_undispatched_give_their_places_back_and_leave_the_owners_last(
    worker: Worker, autojump_clock: trio.testing.MockClock
) -> None:
    """Issue 50: on an `--open` worker a stranger's offer is committed like anyone's, and a stranger
    that sent nothing after the commit held its queue place for as long as it kept the stream open
    (five keys: the worker denied to everyone). Now strangers take all places but the last, which
    is the allowed submitters', and a commit with no dispatch within `dispatch_s` (virtual time
    here) gives its place back, said as an `undispatched` event; a dispatched task keeps its place."""
    _open_worker(worker)
    strangers = [_key() for _ in range(5)]
    held = [await _commit(worker, s, f"s{i}") for i, s in enumerate(strangers[:4])]
    assert all(isinstance(reply, Commit) for _, reply in held)  # 4 of the 5 places (max_queue 4, running 1)
    _, full = await _commit(worker, strangers[4], "s4")
    assert isinstance(full, Decline)
    assert full.reason == DeclineReason.QUEUE_FULL
    mine, commit = await _commit(worker, ALLOWED, "mine")
    assert isinstance(commit, Commit)  # the last place: the owner's
    await mine.send(Dispatch(task_id="mine", lease_id=commit.lease_id))
    await trio.sleep(OfferPolicy().dispatch_s + 1)
    assert all(worker.runner.job(reply.lease_id) is None for _, reply in held)
    job = worker.runner.job(commit.lease_id)
    assert job is not None
    assert job.dispatched
    dropped = [f["submitter"] for e, f in worker.events if e == "undispatched"]
    assert sorted(dropped) == sorted(s.peer_id for s in strangers[:4])
    _, again = await _commit(worker, strangers[4], "s5")
    assert isinstance(again, Commit)  # the places are free again


async def test_an_outcome_left_unacknowledged_ends_its_stream(
    worker: Worker, autojump_clock: trio.testing.MockClock
) -> None:
    """Issue 50: the ack of an outcome is awaited `ack_s` (virtual time here; 30 s in place of 300 to
    stay within the test's deadline), not for as long as the submitter keeps the stream open; the
    stream's end is said (`unacknowledged`)."""
    policy = OfferPolicy(ack_s=30.0)
    _open_worker(worker, policy)
    stranger = _key()
    channel, commit = await _commit(worker, stranger, "t1")
    assert isinstance(commit, Commit)
    await channel.send(cancel(stranger, worker.key.peer_id, commit.lease_id))
    assert isinstance(await _outcome(channel), Failure)
    await trio.sleep(policy.ack_s - 1)
    assert not [e for e, _ in worker.events if e == "unacknowledged"]
    await trio.sleep(2)
    assert [f["task"] for e, f in worker.events if e == "unacknowledged"] == ["t1"]
