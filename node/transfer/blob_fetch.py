"""Fetching a model over `/sark/blob/1.0.0` (the server is `node.transfer.blob`): parallel ranges, resumable.

The fetcher keeps the partial file (`ModelCache.temp_path`) across failures and continues from its
length on a fresh stream, up to a bounded number of attempts. The sha256 is checked before the file
is moved into place: a worker thread reads the file's gap-free prefix back and hashes it while the
rest is still arriving, so the check costs no time after the last byte. Disk reads and writes run in
worker threads, never on the event loop.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import BinaryIO, Final, final

import trio

from node.errors import PeerGone, PeerTimeout, PeerUnreachable, StreamRefused
from node.p2p.wire import Channel
from node.transfer.cache import HASH_BLOCK, ModelCache
from node.transfer.fetch import FetchError, OnBytes
from node.transfer.urls import PeerTrouble
from protocol import (
    BlobChunk,
    BlobEnd,
    BlobGet,
    BlobMeta,
    BlobMissing,
    Busy,
    FailureReason,
    RemoteProtocolError,
)

log = logging.getLogger(__name__)

ATTEMPTS: Final = 5
STREAMS: Final = 4
"""Parallel streams per transfer: yamux's per-stream window caps one stream's throughput."""
MIN_SEGMENT: Final = 8 << 20
"""A transfer is split into parallel ranges only down to this size."""

ChannelFactory = Callable[[], Awaitable[Channel]]
_RETRYABLE: Final = (PeerGone, PeerTimeout, PeerUnreachable, StreamRefused, RemoteProtocolError)


def _trouble(exc: Exception) -> PeerTrouble | None:
    """What the peer did, for the caller that picks the next holder (the runner)."""
    if isinstance(exc, PeerUnreachable):
        return PeerTrouble.UNREACHABLE
    if isinstance(exc, StreamRefused):
        return PeerTrouble.MEASURING if exc.measuring else PeerTrouble.BUSY
    return None


@final
class _Segment:
    """One stream's byte range [start, end); `pos` is how far it got."""

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.pos = start
        self.end = end


@final
class _Transfer:
    """One model's transfer into its partial file; the on-disk prefix survives failed attempts."""

    def __init__(self, sha256: str, size: int, temp: Path, on_bytes: OnBytes | None) -> None:
        self.sha256 = sha256
        self.size = size
        self.temp = temp
        self.done = 0
        self.segments: list[_Segment] = []
        self.refused = 0
        self.active = 0
        self.digest = _Digest()
        self._on_bytes = on_bytes
        self._moved = trio.Event()

    def moved(self) -> None:
        """A segment wrote bytes or ended: wake the digest follower."""
        self._moved.set()
        self._moved = trio.Event()

    async def follow(self, fd: int) -> None:
        """Hash the gap-free prefix as it grows (read back through the attempt's own `fd`), until
        every segment of this attempt has ended."""
        while True:
            target = self.prefix()
            if target > self.digest.hashed:
                await trio.to_thread.run_sync(self.digest.hash_to, fd, target)
            elif self.active == 0:
                return
            else:
                await self._moved.wait()

    def resume_point(self) -> int:
        """Length of a usable partial file (emptied if it is longer than the model)."""
        try:
            length = self.temp.stat().st_size
        except FileNotFoundError:
            return 0
        if length > self.size:
            os.truncate(self.temp, 0)
            return 0
        return length

    def plan(self, streams: int) -> None:
        """Split what is left into up to `streams` ranges of at least `MIN_SEGMENT` bytes."""
        left = self.size - self.done
        count = max(1, min(streams, left // MIN_SEGMENT))
        bounds = [self.done + left * i // count for i in range(count + 1)]
        self.segments = [_Segment(a, b) for a, b in itertools.pairwise(bounds)]

    def prefix(self) -> int:
        """Bytes on disk without a gap from the start (what the next attempt keeps)."""
        done = self.done
        for segment in self.segments:
            done = segment.pos
            if segment.pos < segment.end:
                break
        return done

    def open_at(self, offset: int) -> BinaryIO:
        file = self.temp.open("r+b" if self.temp.exists() else "w+b")  # readable: the digest reads back
        file.truncate(offset)
        return file

    def close_at(self, file: BinaryIO, offset: int) -> None:
        """Cut the file back to its gap-free prefix; an empty one is removed (nothing to resume)."""
        file.truncate(offset)
        file.close()
        if offset == 0:
            self.temp.unlink(missing_ok=True)

    async def pull(self, channel: Channel, segment: _Segment, fd: int) -> None:
        """Fetch one segment on one stream."""
        length = segment.end - segment.pos
        await channel.send(BlobGet(sha256=self.sha256, offset=segment.pos, length=length))
        meta = await channel.receive()
        if isinstance(meta, BlobMissing):
            raise FetchError(
                FailureReason.FETCH, f"peer {channel.peer_id} cannot serve the model: {meta.detail}"
            )
        if isinstance(meta, Busy):
            raise StreamRefused(channel.peer_id, meta.detail, measuring=meta.measuring)
        if not isinstance(meta, BlobMeta) or meta.sha256 != self.sha256:
            raise RemoteProtocolError(f"expected blob_meta for {self.sha256}, got {meta.kind}")
        if meta.size != self.size:
            raise FetchError(FailureReason.FETCH, f"peer has {meta.size} bytes, the offer says {self.size}")
        while True:
            message = await channel.receive()
            if isinstance(message, BlobEnd):
                if segment.pos != segment.end:
                    raise RemoteProtocolError(f"blob ended at {segment.pos}; expected {segment.end}")
                return
            if not isinstance(message, BlobChunk):
                raise RemoteProtocolError(f"expected blob_chunk, got {message.kind}")
            if message.offset != segment.pos or segment.pos + len(message.data) > segment.end:
                raise RemoteProtocolError(
                    f"chunk of {len(message.data)} at {message.offset}; expected {segment.pos}..{segment.end}"
                )
            await trio.to_thread.run_sync(_write_at, fd, message.data, segment.pos)
            segment.pos += len(message.data)
            self.moved()
            if self._on_bytes is not None:
                self._on_bytes(self.done + sum(s.pos - s.start for s in self.segments), self.size)


@final
class _Digest:
    """The sha256 of a partial file's first `hashed` bytes, read back from the file itself."""

    def __init__(self) -> None:
        self.hashed = 0
        self._sha = hashlib.sha256()

    def hash_to(self, fd: int, end: int) -> None:
        """Read [hashed, end) from `fd` and hash it (a worker thread: hashlib releases the GIL)."""
        while self.hashed < end:
            block = os.pread(fd, min(HASH_BLOCK, end - self.hashed), self.hashed)
            if not block:
                raise OSError(f"the file ended at {self.hashed} bytes; {end} were written")
            self._sha.update(block)
            self.hashed += len(block)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def _write_at(fd: int, data: bytes, offset: int) -> None:
    """Write all of `data` at `offset`: a short write goes on with the rest, so a full disk shows as
    its ENOSPC from the next write, not as a short write with no errno."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written == 0:
            raise OSError(errno.EIO, f"nothing written at {offset}")
        view, offset = view[written:], offset + written


async def fetch_blob(
    channel_factory: ChannelFactory,
    sha256: str,
    size: int,
    cache: ModelCache,
    *,
    on_bytes: OnBytes | None = None,
    max_bytes: int,
    attempts: int = ATTEMPTS,
    streams: int = STREAMS,
) -> Path:
    """Fetch a model over `/sark/blob/1.0.0` into `cache`, resuming after failures.

    Args:
        channel_factory: opens a fresh `/sark/blob/1.0.0` channel to the peer holding the model.
        sha256: the model's digest (from the signed offer).
        size: the model's size in bytes (from the signed offer).
        cache: where the model goes; a cached copy is returned without any transfer.
        on_bytes: called with (bytes so far, size) after every chunk; it can step back after a
            failed attempt with several streams (bytes past the first gap are fetched again).
        max_bytes: the node's cap on a model's size.
        attempts: attempts in all; the partial file's gap-free prefix is kept and continued.
        streams: parallel streams per attempt, each a range of at least `MIN_SEGMENT` bytes; streams
            the holder refuses (its per-peer cap) are dropped from the next attempt.

    Returns:
        The cached model's path.

    Raises:
        FetchError: TOO_LARGE, DIGEST_MISMATCH (the partial file is deleted), or FETCH (the peer has
            no copy, refuses because the connection is relayed, or every attempt failed).
    """
    cached = await trio.to_thread.run_sync(cache.path_for, sha256)
    if cached is not None:
        return cached
    if size > max_bytes:
        raise FetchError(FailureReason.TOO_LARGE, f"model is {size} bytes, the cap is {max_bytes}")
    transfer = _Transfer(sha256, size, cache.temp_path(sha256), on_bytes)
    await _attempts(channel_factory, transfer, attempts, streams)
    assert transfer.digest.hashed == size  # every segment ended, so the follower hashed all of it
    if size == 0:  # an empty model has no segment, so no attempt opened the partial file
        await trio.to_thread.run_sync(transfer.temp.touch)
    commit = functools.partial(cache.commit, digest=transfer.digest.hexdigest())
    return await trio.to_thread.run_sync(commit, sha256, transfer.temp)


async def _attempts(
    channel_factory: ChannelFactory, transfer: _Transfer, attempts: int, streams: int
) -> None:
    """Attempt the transfer until it completes, each attempt continuing the partial file's prefix.

    Raises:
        FetchError: FETCH once `attempts` attempts failed.
    """
    for attempt in range(1, attempts + 1):
        transfer.done = await trio.to_thread.run_sync(transfer.resume_point)
        if transfer.digest.hashed > transfer.done:  # a stale partial file was emptied
            transfer.digest = _Digest()
        try:
            await _attempt(channel_factory, transfer, streams)
            return
        except _RETRYABLE as exc:
            log.info(
                "blob %s: attempt %d/%d stopped at %d bytes: %s",
                transfer.sha256,
                attempt,
                attempts,
                transfer.done,
                exc,
            )
            if attempt == attempts:
                detail = f"{attempts} attempts failed at {transfer.done}/{transfer.size} bytes: {exc}"
                raise FetchError(FailureReason.FETCH, detail, peer=_trouble(exc)) from exc
            streams = max(1, streams - transfer.refused)  # the holder's cap: fewer streams next time


async def _attempt(channel_factory: ChannelFactory, transfer: _Transfer, streams: int) -> None:
    """All segments in parallel; the first error stops the others and is raised (never a group).

    A stream the holder refuses (`Busy`: its per-peer cap) does not stop the others.
    """
    transfer.plan(streams)
    transfer.refused = 0
    errors: list[Exception] = []
    file = await trio.to_thread.run_sync(transfer.open_at, transfer.done)
    try:
        async with trio.open_nursery() as nursery:

            def fail(exc: Exception) -> None:
                errors.append(exc)
                if isinstance(exc, StreamRefused):
                    transfer.refused += 1  # the holder's per-peer cap: the other streams go on
                else:
                    nursery.cancel_scope.cancel()

            for segment in transfer.segments:
                transfer.active += 1
                nursery.start_soon(_segment_task, channel_factory, transfer, segment, file.fileno(), fail)
            nursery.start_soon(_follow_task, transfer, file.fileno(), fail)
    finally:
        transfer.done = transfer.prefix()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(transfer.close_at, file, transfer.done)
    fatal = [e for e in errors if isinstance(e, FetchError)]
    if fatal or errors:
        raise (fatal or errors)[0]


async def _segment_task(
    channel_factory: ChannelFactory,
    transfer: _Transfer,
    segment: _Segment,
    fd: int,
    fail: Callable[[Exception], None],
) -> None:
    try:
        async with await channel_factory() as channel:  # closed when pulled, reset on an error
            await transfer.pull(channel, segment, fd)
    except (FetchError, *_RETRYABLE) as exc:
        fail(exc)
    except OSError as exc:
        fail(_caused(FetchError(FailureReason.FETCH, f"writing {transfer.temp}: {exc}"), exc))
    finally:
        transfer.active -= 1
        transfer.moved()


async def _follow_task(transfer: _Transfer, fd: int, fail: Callable[[Exception], None]) -> None:
    try:
        await transfer.follow(fd)
    except OSError as exc:
        fail(_caused(FetchError(FailureReason.FETCH, f"reading back {transfer.temp}: {exc}"), exc))


def _caused(error: FetchError, cause: OSError) -> FetchError:
    """`error` with its cause kept, though raised later: a full disk stays known (`disk_full`)."""
    error.__cause__ = cause
    return error


__all__ = ["ATTEMPTS", "MIN_SEGMENT", "STREAMS", "ChannelFactory", "fetch_blob"]
