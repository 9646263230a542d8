"""`/sark/blob/1.0.0` with the real handler and fetcher: in memory, through a link that can cut
the stream mid-transfer, and once between two real libp2p hosts on loopback."""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
import trio
from kit import owntime

from node.errors import PeerGone, PeerTimeout
from node.p2p.host import HostConfig, open_host
from node.p2p.wire import Channel, Handler, memory_channel_pair
from node.transfer.blob import NO_RELAY, UploadSlots, blob_handler
from node.transfer.blob_fetch import MIN_SEGMENT, fetch_blob
from node.transfer.cache import ModelCache
from node.transfer.fetch import FetchError
from node.transfer.urls import PeerTrouble
from protocol import BLOB, BlobChunk, BlobEnd, BlobGet, BlobMissing, FailureReason

CHUNK = 64 * 1024
DEADLINE = 30.0


@dataclass
class Link:
    """Opens channels to a holder's blob handler through a forwarder that can cut after N chunks.

    The cut is a fault injected on the path (like a dropped connection): both sides are reset.
    """

    nursery: trio.Nursery
    handler: Handler
    cuts: list[int | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)

    async def open(self) -> Channel:
        cut = self.cuts.pop(0) if self.cuts else None
        fetcher_end, near = memory_channel_pair("fetcher", "holder")
        far, holder_end = memory_channel_pair("fetcher", "holder")
        self.nursery.start_soon(self.handler, holder_end)
        self.nursery.start_soon(self._forward, near, far, cut)
        return fetcher_end

    async def _forward(self, near: Channel, far: Channel, cut: int | None) -> None:
        with contextlib.suppress(PeerGone):  # either end may hang up first; the link just stops
            await self._pump(near, far, cut)
        await far.reset()

    async def _pump(self, near: Channel, far: Channel, cut: int | None) -> None:
        request = await near.receive()
        assert isinstance(request, BlobGet)
        self.offsets.append(request.offset)
        await far.send(request)
        chunks = 0
        while True:
            message = await far.receive()
            if isinstance(message, BlobChunk):
                if cut is not None and chunks == cut:
                    await near.reset()
                    await far.reset()
                    return
                chunks += 1
            await near.send(message)
            if isinstance(message, BlobEnd | BlobMissing):
                await near.close()
                return


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def model() -> bytes:
    return os.urandom(20 * CHUNK + 123)


@pytest.fixture
def holder(tmp_path: Path, model: bytes) -> ModelCache:
    cache = ModelCache(tmp_path / "holder")
    src = tmp_path / "model.onnx"
    src.write_bytes(model)
    cache.add_file(src)
    return cache


@pytest.fixture
def fetcher(tmp_path: Path) -> ModelCache:
    return ModelCache(tmp_path / "fetcher")


def _link(
    nursery: trio.Nursery, holder: ModelCache, *cuts: int | None, relayed: bool = False, chunk: int = CHUNK
) -> Link:
    handler = blob_handler(holder, is_relayed=lambda peer: relayed and peer == "fetcher", chunk_size=chunk)
    return Link(nursery, handler, list(cuts))


async def _listing(cache: ModelCache) -> list[str]:
    return sorted(await trio.to_thread.run_sync(os.listdir, cache.root))


async def test_full_transfer_then_cache_hit(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    link = _link(nursery, holder)
    seen: list[int] = []
    sha = _sha(model)
    with owntime.fail_after(DEADLINE):
        path = await fetch_blob(
            link.open, sha, len(model), fetcher, max_bytes=1 << 30, on_bytes=lambda n, _: seen.append(n)
        )
        assert await trio.Path(path).read_bytes() == model
        assert link.offsets == [0]
        assert seen[-1] == len(model)
        assert await _listing(fetcher) == [sha, f"{sha}.json"]
        again = await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30)
    assert again == path
    assert link.offsets == [0]  # the second fetch moved no bytes


async def test_resumes_after_a_mid_transfer_reset(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    link = _link(nursery, holder, 5, None)
    seen: list[int] = []
    with owntime.fail_after(DEADLINE):
        path = await fetch_blob(
            link.open,
            _sha(model),
            len(model),
            fetcher,
            max_bytes=1 << 30,
            on_bytes=lambda n, _: seen.append(n),
        )
    assert link.offsets == [0, 5 * CHUNK]
    assert seen == sorted(seen)
    assert len(seen) == 21  # every chunk arrived exactly once
    assert await trio.Path(path).read_bytes() == model


async def test_parallel_streams_fetch_ranges_and_recover_from_a_cut(
    nursery: trio.Nursery, tmp_path: Path, fetcher: ModelCache
) -> None:
    data = os.urandom(2 * MIN_SEGMENT + 5)
    src = tmp_path / "big.onnx"
    src.write_bytes(data)
    holder = ModelCache(tmp_path / "big-holder")
    sha, _ = holder.add_file(src)
    link = _link(nursery, holder, None, 2, chunk=1 << 20)
    with owntime.fail_after(DEADLINE):
        path = await fetch_blob(link.open, sha, len(data), fetcher, max_bytes=1 << 30, streams=4)
    assert set(link.offsets[:2]) == {0, len(data) // 2}  # two ranges: each at least MIN_SEGMENT
    assert len(link.offsets) >= 3  # one stream was cut: a second attempt ran
    assert await trio.Path(path).read_bytes() == data
    assert await _listing(fetcher) == [sha, f"{sha}.json"]


async def test_partial_file_outlives_a_failed_fetch(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    sha = _sha(model)
    link = _link(nursery, holder, 1, 1, 1, None)
    with owntime.fail_after(DEADLINE):
        with pytest.raises(FetchError) as info:
            await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30, attempts=3)
        assert info.value.reason is FailureReason.FETCH
        assert "3 attempts failed" in info.value.detail
        assert (await trio.Path(fetcher.temp_path(sha)).stat()).st_size == 3 * CHUNK
        path = await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30)
    assert link.offsets == [0, CHUNK, 2 * CHUNK, 3 * CHUNK]
    assert await trio.Path(path).read_bytes() == model


async def test_a_corrupt_partial_file_is_caught_by_the_digest_of_the_bytes_on_disk(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    sha = _sha(model)
    await trio.Path(fetcher.temp_path(sha)).write_bytes(bytes(b ^ 0xFF for b in model[:CHUNK]))
    link = _link(nursery, holder)
    with owntime.fail_after(DEADLINE):
        with pytest.raises(FetchError) as info:
            await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30)
        assert info.value.reason is FailureReason.DIGEST_MISMATCH
        assert link.offsets == [CHUNK]  # it resumed after the bad prefix, and the digest still saw it
        assert await _listing(fetcher) == []
        path = await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30)
    assert await trio.Path(path).read_bytes() == model


async def test_missing_digest(nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache) -> None:
    link = _link(nursery, holder)
    unknown = _sha(b"a model nobody has")
    with owntime.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await fetch_blob(link.open, unknown, 1000, fetcher, max_bytes=1 << 30)
    assert info.value.reason is FailureReason.FETCH
    assert "not in this node's cache" in info.value.detail
    assert link.offsets == [0]  # not retried
    assert await _listing(fetcher) == []


async def test_relayed_peer_is_refused(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    link = _link(nursery, holder, relayed=True)
    with owntime.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await fetch_blob(link.open, _sha(model), len(model), fetcher, max_bytes=1 << 30)
    assert info.value.reason is FailureReason.FETCH
    assert NO_RELAY in info.value.detail
    assert link.offsets == [0]
    assert await _listing(fetcher) == []


async def test_tampered_bytes_fail_the_digest_and_leave_nothing(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    sha = _sha(model)
    path = holder.path_for(sha)
    assert path is not None
    st = path.stat()
    os.chmod(path, 0o644)
    with path.open("r+b") as f:  # one flipped byte, size and mtime kept: the holder cannot tell
        f.seek(7 * CHUNK)
        f.write(bytes([model[7 * CHUNK] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    link = _link(nursery, holder)
    with owntime.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await fetch_blob(link.open, sha, len(model), fetcher, max_bytes=1 << 30)
    assert info.value.reason is FailureReason.DIGEST_MISMATCH
    assert await _listing(fetcher) == []


async def test_too_large_model_opens_no_stream(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    link = _link(nursery, holder)
    with pytest.raises(FetchError) as info:
        await fetch_blob(link.open, _sha(model), len(model), fetcher, max_bytes=len(model) - 1)
    assert info.value.reason is FailureReason.TOO_LARGE
    assert link.offsets == []


async def test_size_disagreeing_with_the_offer_is_refused(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    link = _link(nursery, holder)
    with owntime.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await fetch_blob(link.open, _sha(model), len(model) + 1, fetcher, max_bytes=1 << 30)
    assert info.value.reason is FailureReason.FETCH
    assert "the offer says" in info.value.detail


async def test_transfer_between_two_libp2p_hosts(
    holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    sha = _sha(model)
    with owntime.fail_after(DEADLINE):
        async with open_host(HostConfig(key_file=None)) as a, open_host(HostConfig(key_file=None)) as b:
            a.set_handler(BLOB, blob_handler(holder, is_relayed=a.is_relayed))

            async def open_to_a() -> Channel:
                return await b.open_channel(a.peer_id, BLOB, addrs=a.addrs())

            path = await fetch_blob(open_to_a, sha, len(model), fetcher, max_bytes=1 << 30)
            assert not a.is_relayed(b.peer_id)
    assert await trio.Path(path).read_bytes() == model


async def test_streams_over_the_holders_per_peer_cap_are_dropped(tmp_path: Path, fetcher: ModelCache) -> None:
    data = os.urandom(2 * MIN_SEGMENT + 1)
    src = tmp_path / "big.onnx"
    src.write_bytes(data)
    holder = ModelCache(tmp_path / "capped-holder")
    sha, _ = holder.add_file(src)
    with owntime.fail_after(DEADLINE):
        async with open_host(HostConfig(key_file=None)) as a, open_host(HostConfig(key_file=None)) as b:
            a.set_handler(BLOB, blob_handler(holder), max_per_peer=1)

            async def open_to_a() -> Channel:
                return await b.open_channel(a.peer_id, BLOB, addrs=a.addrs())

            path = await fetch_blob(open_to_a, sha, len(data), fetcher, max_bytes=1 << 30, streams=2)
    assert await trio.Path(path).read_bytes() == data


async def test_a_holder_that_cannot_be_reached_is_named_so(fetcher: ModelCache, model: bytes) -> None:
    with owntime.fail_after(DEADLINE):
        async with open_host(HostConfig(key_file=None)) as gone:
            gone_id, gone_addrs = gone.peer_id, gone.addrs()
        async with open_host(HostConfig(key_file=None)) as b:

            async def open_to_gone() -> Channel:
                return await b.open_channel(gone_id, BLOB, addrs=gone_addrs, timeout=5)

            with pytest.raises(FetchError) as info:
                await fetch_blob(open_to_gone, _sha(model), len(model), fetcher, max_bytes=1 << 30)
    assert (info.value.reason, info.value.peer) == (FailureReason.FETCH, PeerTrouble.UNREACHABLE)


async def test_a_holder_that_refuses_every_stream_is_named_busy(
    holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    with owntime.fail_after(DEADLINE):
        async with open_host(HostConfig(key_file=None)) as a, open_host(HostConfig(key_file=None)) as b:
            a.set_handler(BLOB, blob_handler(holder), max_per_peer=0)

            async def open_to_a() -> Channel:
                return await b.open_channel(a.peer_id, BLOB, addrs=a.addrs())

            with pytest.raises(FetchError) as info:
                await fetch_blob(open_to_a, _sha(model), len(model), fetcher, max_bytes=1 << 30)
    assert (info.value.reason, info.value.peer) == (FailureReason.FETCH, PeerTrouble.BUSY)


async def test_a_slow_reader_keeps_its_upload_slot_only_until_another_peer_asks_past_the_hold(
    nursery: trio.Nursery, holder: ModelCache, fetcher: ModelCache, model: bytes
) -> None:
    """Issue 50: any peer that names a model the holder has is served, and chooses how fast it reads.
    A stranger reading a chunk now and then held its upload slot for as long as it liked (four such
    denied the node's uploads to everyone). Now, with every slot taken, a newcomer takes the slot of
    the peer served longest past `hold_s`, and that upload is cut. The hold is set, not waited for:
    an hour first (the newcomer is told busy), then none (it fetches the whole model)."""
    events: list[dict[str, object]] = []
    slots = UploadSlots(1, hold_s=3600.0)
    handler = blob_handler(
        holder,
        chunk_size=1024,
        slots=slots,
        events=lambda event, /, **f: events.append({"event": event, **f}),
    )
    sha = _sha(model)

    async def serve(channel: Channel) -> None:
        with contextlib.suppress(PeerGone):  # a fetcher told busy hangs up first: the host's wrapper's
            await handler(channel)

    async def open_as(peer: str, *, lockstep: bool = False) -> Channel:
        mine, theirs = memory_channel_pair(peer, "holder", lockstep=lockstep)
        nursery.start_soon(serve, theirs)
        return mine

    async def trickle(
        channel: Channel, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await channel.send(BlobGet(sha256=sha, offset=0))
        await channel.receive()  # its meta: the upload is streaming
        task_status.started()
        with contextlib.suppress(PeerGone, PeerTimeout):  # the holder cut it (memory: it reads nothing)
            while True:  # a chunk now and then: within every read deadline, never done
                await channel.receive()
                await trio.sleep(0.5)

    with owntime.fail_after(DEADLINE):
        await nursery.start(trickle, await open_as("slow", lockstep=True))
        with pytest.raises(FetchError) as busy:  # within the hold: the slot is the slow reader's
            await fetch_blob(partial(open_as, "honest"), sha, len(model), fetcher, max_bytes=1 << 30)
        assert busy.value.peer == PeerTrouble.BUSY
        slots.hold_s = 0.0  # the slow reader is now past its hold
        path = await fetch_blob(partial(open_as, "honest"), sha, len(model), fetcher, max_bytes=1 << 30)
        assert await trio.Path(path).read_bytes() == model
    cut = [e for e in events if e["event"] == "upload" and e["peer"] == "slow"]
    assert [e["cut"] for e in cut] == [True]
    assert isinstance(cut[0]["bytes"], int)
    assert cut[0]["bytes"] < len(model)
