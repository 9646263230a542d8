"""`/sark/blob/1.0.0`: content-addressed model transfer by sha256, chunked and resumable (the serving side).

One stream per request. The fetcher (`node.transfer.blob_fetch`) sends `BlobGet(sha256, offset, length)`;
the server answers `BlobMeta(sha256, size)`, then `BlobChunk`s in order, then `BlobEnd` and closes,
or `BlobMissing` when it does not hold the model or the peer is reached only through a relay (model
bytes never cross a relay). No per-chunk acknowledgement: the muxer's flow control paces the sender.
File reads run in worker threads, never on the event loop.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Final, final

import trio

from node.errors import PeerGone, PeerTimeout
from node.events import EventSink, quiet
from node.p2p.wire import Channel, Handler
from node.transfer.cache import ModelCache
from protocol import (
    MAX_FRAME,
    BlobChunk,
    BlobEnd,
    BlobGet,
    BlobMeta,
    BlobMissing,
    Busy,
    Message,
)

log = logging.getLogger(__name__)

CHUNK_SIZE: Final = 1 << 20
MAX_CHUNK: Final = MAX_FRAME - 1024
"""The largest chunk whose message (data plus a few bytes of msgpack) still fits one frame."""
NO_RELAY: Final = "model bytes never cross a relay"


DRAIN_S: Final = 30.0
"""How long a measurement about to start waits for uploads already streaming before it cuts them."""
HOLD_S: Final = 60.0
"""How long a peer's uploads keep its slot against a newcomer: when every slot is taken, a new peer
takes the slot of the one served longest past this (its uploads are cut; its fetcher keeps the prefix
and resumes). A 2 GiB model at 50 MB/s is 40 s. The cheater's view: any peer that names a model this
node holds is served (the sha256 is in every offer of a campaign), and it chooses how fast it reads;
a reader granting a few bytes every few seconds held its slot for as long as it liked, and four of
them denied the node's uploads to everyone. The eviction reads only how long a slot was held, so a
slow reader keeps it until someone else asks, past `HOLD_S`."""


@final
class UploadSlots:
    """At most `peers` peers download from this node at once (all their parallel streams count as one);
    the rest are told `busy` at once and try another holder. Counts what it served.

    While the node's own measurement runs (`measuring`) it uploads nothing: every request is told
    `busy` with `measuring=True`. Uploads already streaming when a measurement is about to start
    are given `drain_s` to finish; the measurement waits for them, and cuts those still running
    then (their fetchers keep the prefix they received and resume it from another source).
    """

    def __init__(self, peers: int | None, *, drain_s: float = DRAIN_S, hold_s: float = HOLD_S) -> None:
        self._limit = peers
        self._drain_s = drain_s
        self.hold_s = hold_s
        self._active: dict[str, int] = {}
        self._since: dict[str, float] = {}  # when each active peer took its slot
        self._streaming: dict[trio.CancelScope, str] = {}  # each streaming upload's scope: its peer
        self.evicted: set[trio.CancelScope] = set()
        self._idle = trio.Event()
        self._idle.set()
        self._measuring = 0
        self.served_bytes: dict[str, int] = {}

    @property
    def measuring_now(self) -> bool:
        return self._measuring > 0

    def take(self, peer_id: str) -> bool:
        """A slot for `peer_id` (its streams share one); when every slot is taken, the slot of the peer
        served longest past `hold_s`, whose uploads are cut (`HOLD_S`); False: none is free."""
        full = self._limit is not None and peer_id not in self._active and len(self._active) >= self._limit
        if full and not self._evict_oldest():
            return False
        self._since.setdefault(peer_id, trio.current_time())
        self._active[peer_id] = self._active.get(peer_id, 0) + 1
        return True

    def _evict_oldest(self) -> bool:
        if not self._since:
            return False
        peer, since = min(self._since.items(), key=lambda item: item[1])
        if trio.current_time() - since < self.hold_s:
            return False
        for scope, holder in list(self._streaming.items()):
            if holder == peer:
                self.evicted.add(scope)
                scope.cancel()
        self._active.pop(peer, None)
        self._since.pop(peer, None)
        return True

    def give_back(self, peer_id: str) -> None:
        left = self._active.get(peer_id, 1) - 1
        if left:
            self._active[peer_id] = left
        else:
            self._active.pop(peer_id, None)
            self._since.pop(peer_id, None)

    def count(self, sha256: str, size: int) -> None:
        self.served_bytes[sha256] = self.served_bytes.get(sha256, 0) + size

    @contextmanager
    def streaming(self, peer_id: str = "") -> Iterator[trio.CancelScope]:
        """One upload's lifetime, with the scope (for the upload to enter) that `measuring` or a
        newcomer past `hold_s` may cancel; a measurement starts only after every such block was left."""
        scope = trio.CancelScope()
        self._streaming[scope] = peer_id
        self._idle = trio.Event() if len(self._streaming) == 1 else self._idle
        try:
            yield scope
        finally:
            self._streaming.pop(scope, None)
            self.evicted.discard(scope)
            if not self._streaming:
                self._idle.set()

    @asynccontextmanager
    async def measuring(self) -> AsyncIterator[None]:
        """No upload runs inside this block: new requests are refused from its start, streaming ones
        are waited for (up to `drain_s`), then cut."""
        self._measuring += 1
        try:
            with trio.move_on_after(self._drain_s):
                await self._idle.wait()
            for scope in list(self._streaming):
                scope.cancel()
            with trio.CancelScope(shield=True):
                await self._idle.wait()  # a cut upload only closes its file on the way out
            yield
        finally:
            self._measuring -= 1


def blob_handler(
    cache: ModelCache,
    *,
    is_relayed: Callable[[str], bool] = lambda _: False,
    chunk_size: int = CHUNK_SIZE,
    slots: UploadSlots | None = None,
    events: EventSink = quiet,
) -> Handler:
    """The `/sark/blob/1.0.0` stream handler serving models from `cache`.

    Args:
        cache: where the served models live.
        is_relayed: whether our connection to a peer goes through a relay; such peers get
            `BlobMissing(detail=NO_RELAY)`.
        chunk_size: payload bytes per `BlobChunk` (at most `MAX_CHUNK`, so a chunk fits a frame).
        slots: how many peers may download at once (unlimited if None), and whether the node is
            measuring; the rest get `busy`.
        events: gets `upload` (peer, sha256, bytes, started, ended, cut: wall-clock seconds) after
            each upload and `upload_refused` (peer, sha256, measuring) for each `busy`.
    """
    if not 0 < chunk_size <= MAX_CHUNK:
        raise ValueError(f"chunk_size must be in 1..{MAX_CHUNK}, got {chunk_size}")
    uploads = slots or UploadSlots(None)

    async def handle(channel: Channel) -> None:
        request = await channel.receive()
        if not isinstance(request, BlobGet):
            log.info("blob: %s sent %s instead of blob_get; stream reset", channel.peer_id, request.kind)
            await channel.reset()
            return
        if is_relayed(channel.peer_id):
            await _answer(channel, BlobMissing(sha256=request.sha256, detail=NO_RELAY))
            return
        path = await trio.to_thread.run_sync(cache.path_for, request.sha256)
        if path is None:
            await _answer(channel, BlobMissing(sha256=request.sha256, detail="not in this node's cache"))
            return
        busy = _refusal(uploads, channel.peer_id)
        if busy is not None:
            events("upload_refused", peer=channel.peer_id, sha256=request.sha256, measuring=busy.measuring)
            await _answer(channel, busy)
            return
        try:
            await _upload(channel, path, request, chunk_size, uploads, events)
        finally:
            uploads.give_back(channel.peer_id)

    return handle


def _refusal(uploads: UploadSlots, peer_id: str) -> Busy | None:
    """Why this request is not served now (`take` is checked last: it takes a slot)."""
    if uploads.measuring_now:
        return Busy(detail="this worker is measuring: try another holder", measuring=True)
    if not uploads.take(peer_id):
        return Busy(detail="all upload slots are taken: try another holder")
    return None


async def _upload(
    channel: Channel, path: Path, request: BlobGet, chunk_size: int, uploads: UploadSlots, events: EventSink
) -> None:
    """Serve one request inside an upload scope that a starting measurement may cut."""
    started, sent = time.time(), 0
    with uploads.streaming(channel.peer_id) as scope:
        with scope:
            try:
                sent = await _serve(channel, path, request, chunk_size)
                uploads.count(request.sha256, sent)
            except (PeerGone, PeerTimeout) as exc:
                log.info("blob: %s went away mid-transfer: %s", channel.peer_id, exc.detail)
                await channel.reset()
        if scope.cancelled_caught:
            why = (
                f"held its slot past {uploads.hold_s:g} s and another peer asked"
                if scope in uploads.evicted
                else ""
            )
            log.info("blob: upload to %s cut: %s", channel.peer_id, why or "a measurement starts")
            with trio.CancelScope(shield=True):
                await channel.reset()
        events(
            "upload",
            peer=channel.peer_id,
            sha256=request.sha256,
            bytes=sent,
            started=started,
            ended=time.time(),
            cut=scope.cancelled_caught,
        )


async def _answer(channel: Channel, message: Message) -> None:
    await channel.send(message)
    await channel.close()


async def _serve(channel: Channel, path: Path, request: BlobGet, chunk_size: int) -> int:
    """Stream `path` from the requested offset: meta, chunks (each read in a thread), end.

    Returns:
        The payload bytes sent.
    """
    file = await trio.to_thread.run_sync(path.open, "rb")
    try:
        size = (await trio.to_thread.run_sync(os.fstat, file.fileno())).st_size
        if request.offset > size:
            detail = f"offset {request.offset} is past the end ({size} bytes)"
            await _answer(channel, BlobMissing(sha256=request.sha256, detail=detail))
            return 0
        end = size if request.length is None else min(size, request.offset + request.length)
        await channel.send(BlobMeta(sha256=request.sha256, size=size))
        offset = request.offset
        while offset < end:
            count = min(chunk_size, end - offset)
            data = await trio.to_thread.run_sync(os.pread, file.fileno(), count, offset)
            if len(data) != count:
                raise OSError(f"{path} changed size while being served")
            await channel.send(BlobChunk(offset=offset, data=data))
            offset += count
        await _answer(channel, BlobEnd())
        return end - request.offset
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(file.close)


__all__ = ["CHUNK_SIZE", "DRAIN_S", "MAX_CHUNK", "NO_RELAY", "UploadSlots", "blob_handler"]
