"""Issue 13 item 5: a worker's measurement is never concurrent with an upload it serves.

Real libp2p hosts on loopback, real runners, real measurements of the example ONNX model in spawned
children. Worker A holds the model and measures; worker B is offered a task naming A as a holder: A
answers `busy` (measuring), B fetches from the submitter at once and completes. The worker's own
event lines (`upload` intervals from the blob handler, the `measured` interval from the runner) show
no overlap. Then the other direction: an upload already streaming when a measurement is about to
start is waited for, or cut after the drain time, before the measurement begins.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from kit import owntime
from kit.data import make_profile

from node.errors import PeerGone, StreamRefused
from node.p2p.host import Host, HostConfig, open_host
from node.p2p.wire import Channel, memory_channel_pair
from node.transfer.blob import UploadSlots, blob_handler
from node.transfer.cache import ModelCache
from node.transfer.fetch import UrlPolicy
from node.worker.job import Job
from node.worker.outbox import Outbox
from node.worker.runner import Runner
from protocol import (
    BLOB,
    BlobChunk,
    BlobEnd,
    BlobGet,
    BlobMeta,
    ComputeUnit,
    Holder,
    ModelRef,
    OfferBody,
    Result,
    TaskSpec,
)

MODEL = Path(__file__).resolve().parents[3] / "examples" / "models" / "tiny-convnet.onnx"
LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
DEADLINE = 120.0


@dataclass
class Recorder:
    """An event sink that keeps (event, wall-clock time, fields) and wakes whoever waits for an event."""

    seen: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    wakeups: dict[str, trio.Event] = field(default_factory=dict)

    def __call__(self, event: str, /, **fields: Any) -> None:
        self.seen.append((event, time.time(), fields))
        self.wakeups.setdefault(event, trio.Event()).set()

    async def wait(self, event: str) -> None:
        await self.wakeups.setdefault(event, trio.Event()).wait()

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f for e, _, f in self.seen if e == event]


@dataclass
class Worker:
    host: Host
    runner: Runner
    events: Recorder


def _cache(root: Path, model: Path | None) -> ModelCache:
    cache = ModelCache(root)
    if model is not None:
        cache.add_file(model)
    return cache


@asynccontextmanager
async def _worker(
    tmp: Path, name: str, model: Path | None, nursery: trio.Nursery, *, exclusion: bool = True
) -> AsyncIterator[Worker]:
    """A worker as `open_worker` composes it (runner and blob handler sharing one `UploadSlots`),
    without the DHT: the test names holders and the submitter itself."""
    events = Recorder()
    cache = _cache(tmp / name / "cache", model)
    slots = UploadSlots(4)
    async with open_host(HostConfig(key_file=tmp / f"{name}.key", listen=LOOPBACK)) as host:

        async def open_blob(peer: str, addrs: tuple[str, ...]) -> Channel:
            return await host.open_channel(peer, BLOB, addrs=addrs, read_timeout=30.0)

        runner = Runner(
            peer_id=host.peer_id, private_key=host.private_key, profile=make_profile(name), cache=cache,
            outbox=Outbox(tmp / name / "outbox"), policy=UrlPolicy(), open_blob=open_blob, events=events,
            uploads=slots if exclusion else None,
        )  # fmt: skip
        host.set_handler(BLOB, blob_handler(cache, slots=slots, events=events))
        await nursery.start(runner.serve)
        yield Worker(host, runner, events)


def _offer(
    worker: Worker, submitter: Host, model: ModelRef, runs: int, holders: tuple[Holder, ...]
) -> OfferBody:
    now = time.time()
    return OfferBody(
        campaign_id="c1", task_id=f"t-{worker.host.peer_id[-6:]}", submitter=submitter.peer_id,
        recipient=worker.host.peer_id, nonce=os.urandom(16), issued_at=now, expires_at=now + 600,
        spec=TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=runs, warmups=2, load_runs=1, processes=1),
        model=model, submitter_addrs=tuple(submitter.addrs()), holders=holders,
    )  # fmt: skip


def _run(worker: Worker, body: OfferBody) -> Job:
    job = worker.runner.commit(body)
    worker.runner.dispatch(job)
    return job


def _overlaps(uploads: list[dict[str, Any]], measured: list[dict[str, Any]]) -> list[str]:
    """Every upload interval that overlaps a measurement interval, described."""
    return [
        f"upload to {u['peer']} {u['started']:.3f}..{u['ended']:.3f}"
        f" inside the measurement {m['started']:.3f}..{m['ended']:.3f}"
        for u in uploads
        for m in measured
        if u["started"] < m["ended"] and m["started"] < u["ended"]
    ]


async def _two_workers_one_measuring(tmp_path: Path, nursery: trio.Nursery, *, exclusion: bool) -> None:
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    model = ModelRef(name=MODEL.name, size=MODEL.stat().st_size, sha256=sha)
    seeded = tmp_path / "seed" / MODEL.name
    seeded.parent.mkdir()
    shutil.copy(MODEL, seeded)
    served = Recorder()
    async with (
        open_host(HostConfig(key_file=tmp_path / "s.key", listen=LOOPBACK)) as submitter,
        _worker(tmp_path, "a", seeded, nursery, exclusion=exclusion) as a,
        _worker(tmp_path, "b", None, nursery) as b,
    ):
        submitter.set_handler(BLOB, blob_handler(_cache(tmp_path / "s-cache", seeded), events=served))
        job_a = _run(a, _offer(a, submitter, model, 300, ()))
        await a.events.wait("measuring")
        holder_a = Holder(peer_id=a.host.peer_id, addrs=tuple(a.host.addrs()))
        job_b = _run(b, _offer(b, submitter, model, 5, (holder_a,)))
        await job_b.finished.wait()
        await job_a.finished.wait()
        assert isinstance(job_a.outcome, Result), job_a.outcome
        assert isinstance(job_b.outcome, Result), job_b.outcome
        measured = a.events.of("measured")
        assert len(measured) == 1
        assert not _overlaps(a.events.of("upload"), measured), _overlaps(a.events.of("upload"), measured)
        assert [f["peer"] for f in a.events.of("upload_refused") if f["measuring"]] == [b.host.peer_id]
        [fetched] = b.events.of("model")
        assert (fetched["source"], fetched["peer"]) == ("blob", submitter.peer_id)
        assert [u["peer"] for u in served.of("upload")] == [b.host.peer_id]
        # the exclusion ends with the measurement: A serves again afterwards
        channel = await b.host.open_channel(a.host.peer_id, BLOB, addrs=a.host.addrs())
        await channel.send(BlobGet(sha256=sha, offset=0, length=10))
        assert isinstance(await channel.receive(), BlobMeta)
        await channel.close()
        with owntime.fail_after(10):
            await a.events.wait("upload")
        [after] = a.events.of("upload")
        assert after["started"] >= measured[0]["ended"]
        assert after["bytes"] == 10


async def test_a_measuring_holder_answers_busy_and_the_other_worker_fetches_from_the_submitter(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    with owntime.fail_after(DEADLINE):
        await _two_workers_one_measuring(tmp_path, nursery, exclusion=True)


# -- an upload already streaming when a measurement is about to start ---------------------------------


@dataclass
class Holder1:
    """A blob handler serving a 1 MiB model in 64 KiB chunks over lockstep in-memory streams: a
    fetcher that stops reading stalls the upload, as a full muxer window does."""

    nursery: trio.Nursery
    slots: UploadSlots
    events: Recorder
    sha: str
    handler: Any = None

    async def open(self) -> Channel:
        mine, theirs = memory_channel_pair("fetcher", "holder", lockstep=True)
        self.nursery.start_soon(self.handler, theirs)
        return mine

    async def start_upload(self) -> Channel:
        channel = await self.open()
        await channel.send(BlobGet(sha256=self.sha, offset=0))
        assert isinstance(await channel.receive(), BlobMeta)
        assert isinstance(await channel.receive(), BlobChunk)
        return channel

    async def refused_while_measuring(self) -> None:
        """A new request is told `busy` (measuring): also the sign that the measurement is waiting."""
        channel = await self.open()
        await channel.send(BlobGet(sha256=self.sha, offset=0))
        with pytest.raises(StreamRefused) as info:
            await channel.receive()
        assert info.value.measuring


def _holder(tmp_path: Path, nursery: trio.Nursery, drain_s: float) -> Holder1:
    src = tmp_path / "big.onnx"
    src.write_bytes(os.urandom(1 << 20))
    cache = ModelCache(tmp_path / "holder")
    sha, _ = cache.add_file(src)
    holder = Holder1(nursery, UploadSlots(4, drain_s=drain_s), Recorder(), sha)
    holder.handler = blob_handler(cache, slots=holder.slots, events=holder.events, chunk_size=64 << 10)
    return holder


async def _drain(channel: Channel) -> None:
    while True:
        await channel.receive()


async def _measure(slots: UploadSlots, entered: list[float]) -> None:
    async with slots.measuring():
        entered.append(time.time())


async def test_a_streaming_upload_is_finished_before_the_measurement_starts(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    holder, entered = _holder(tmp_path, nursery, drain_s=60.0), []
    with owntime.fail_after(DEADLINE):
        channel = await holder.start_upload()
        async with trio.open_nursery() as inner:
            inner.start_soon(_measure, holder.slots, entered)
            await holder.refused_while_measuring()
            assert not entered  # the upload still streams: the measurement waits for it
            while not isinstance(await channel.receive(), BlobEnd):
                pass
    [upload] = holder.events.of("upload")
    assert not upload["cut"]
    assert upload["bytes"] == 1 << 20
    assert upload["ended"] <= entered[0]


async def test_an_upload_still_streaming_after_the_drain_time_is_cut_before_the_measurement(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    holder, entered = _holder(tmp_path, nursery, drain_s=0.3), []
    with owntime.fail_after(DEADLINE):
        channel = await holder.start_upload()  # and not read again until it is cut
        async with trio.open_nursery() as inner:
            inner.start_soon(_measure, holder.slots, entered)
            await holder.refused_while_measuring()
        [upload] = holder.events.of("upload")
        with pytest.raises(PeerGone):  # chunks already sent may come first, then the reset
            await _drain(channel)
    assert upload["cut"]
    assert upload["ended"] <= entered[0]
