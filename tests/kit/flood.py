"""Flooders and an honest pinger for the flood tests (T7, T8, T9), run as child processes.

    python tests/kit/flood.py MODE --target MULTIADDR [--count N]

Every wait here is generous (`PATIENCE_S`): the flood tests assert what the node did (a busy answer, a
stream ended, the honest peer answered), never how fast, so a loaded machine cannot fail them.

Modes (each prints one JSON summary line, `{"event": MODE, ...}`):
    ping      `/sark/profile` round trips on a new stream each, until a line arrives on stdin; reports
              how many, how many failed, p50/p99/max ms (prints `{"event": "ready"}` after the first)
    streams   opens `count` streams at once on one connection and holds them open without a word
    junk      `count` malformed frames (bad msgpack, unknown kinds, wrong types, 4 GiB headers) on
              streams of 20 frames each, at most 4 streams in flight
    tcp-junk  `count` raw TCP connections that send garbage instead of a handshake
    drip      one stream that sends one byte a second (a frame never finishes); reports when it was cut
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trio

from node.errors import NodeError, PeerTimeout, StreamRefused
from node.p2p.host import Host, HostConfig, open_host, peer_of
from protocol import PROFILE, ProfileGet, ProfileReply, ProtocolError

PATIENCE_S = 120.0
"""How long the flooders wait for anything: far past every deadline of the node (5 to 15 s)."""

JUNK: tuple[bytes, ...] = (
    b"\x01\xc1",  # one byte that is never valid msgpack
    b"\x03\x92\x01\x02",  # an array, not a map
    b"\x0b\x81\xa4kind\xa4nope",  # an unknown kind
    b"\x0a\x81\xa4kind\x93\x01\x02\x03",  # kind is not a string
    b"\xff\xff\xff\xff\x0f",  # a 4 GiB frame header
    b"\x05hello",  # not msgpack at all
)


def emit(event: str, **fields: Any) -> None:
    """One JSON event line on stdout."""
    print(json.dumps({"event": event, **fields}), flush=True)


async def ping_once(host: Host, target: str) -> float:
    """One `/sark/profile` round trip on a new stream; its milliseconds."""
    start = time.monotonic()
    channel = await host.open_channel(
        peer_of(target), PROFILE, addrs=(target,), timeout=PATIENCE_S, read_timeout=PATIENCE_S
    )
    try:
        await channel.send(ProfileGet())
        reply = await channel.receive()
    finally:
        await channel.close()
    if not isinstance(reply, ProfileReply):
        raise ProtocolError(f"answered {reply.kind}")
    return (time.monotonic() - start) * 1000


async def ping(host: Host, target: str) -> None:
    """Round trips until stdin has a line; then the summary."""
    rtts: list[float] = []
    errors: list[str] = []
    rtts.append(await ping_once(host, target))
    emit("ready")
    async with trio.open_nursery() as nursery:

        async def stop_on_stdin() -> None:
            await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            nursery.cancel_scope.cancel()

        nursery.start_soon(stop_on_stdin)
        while True:
            try:
                rtts.append(await ping_once(host, target))
            except (NodeError, ProtocolError) as exc:
                errors.append(str(exc)[:200])
            await trio.sleep(0.02)  # pacing, so the pinger does not take a core of its own
    rtts.sort()
    p99 = rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))]
    emit(
        "ping",
        count=len(rtts),
        failed=len(errors),
        errors=errors[:5],
        p50_ms=round(statistics.median(rtts), 1),
        p99_ms=round(p99, 1),
        max_ms=round(rtts[-1], 1),
    )


async def hold_streams(host: Host, target: str, count: int) -> None:
    """Open `count` streams at once and keep each until the node ends it."""
    peer = peer_of(target)
    await host.connect(target)
    outcome = {"opened": 0, "refused": 0, "ended": 0, "held": 0, "failed": 0}

    async def one() -> None:
        try:
            channel = await host.open_channel(peer, PROFILE, timeout=PATIENCE_S, read_timeout=PATIENCE_S)
        except NodeError:
            outcome["failed"] += 1
            return
        outcome["opened"] += 1
        try:
            await channel.receive()
        except StreamRefused:
            outcome["refused"] += 1  # over the per-peer cap: answered busy at once
        except PeerTimeout:
            outcome["held"] += 1  # the node kept a silent stream past every deadline of its own
        except (NodeError, ProtocolError):
            outcome["ended"] += 1  # within the cap: reset at the first-frame deadline
        await channel.reset()

    start = time.monotonic()
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    emit("streams", seconds=round(time.monotonic() - start, 2), **outcome)


async def junk(host: Host, target: str, count: int) -> None:
    """`count` malformed frames, 20 to a stream, 4 streams in flight."""
    peer = peer_of(target)
    await host.connect(target)
    limit = trio.Semaphore(4)
    outcome = dict.fromkeys(("frames", "streams", "answered", "refused", "ended", "held", "failed"), 0)

    async def one(frames: bytes, n: int) -> None:
        async with limit:
            try:
                channel = await host.open_channel(peer, PROFILE, timeout=PATIENCE_S, read_timeout=PATIENCE_S)
                await channel.send_raw(frames)
            except NodeError:
                outcome["failed"] += 1
                return
            outcome["frames"] += n
            outcome["streams"] += 1
            try:
                await channel.receive()
                outcome["answered"] += 1  # a reply to junk would be a bug in the node
            except StreamRefused:
                outcome["refused"] += 1
            except PeerTimeout:
                outcome["held"] += 1  # the node kept the stream open past every deadline of its own
            except (NodeError, ProtocolError):
                outcome["ended"] += 1  # the node reset (or closed) the stream
            await channel.reset()

    async with trio.open_nursery() as nursery:
        for start in range(0, count, 20):
            n = min(20, count - start)
            nursery.start_soon(one, b"".join(JUNK[(start + i) % len(JUNK)] for i in range(n)), n)
    emit("junk", **outcome)


async def tcp_junk(target: str, count: int) -> None:
    """`count` raw TCP connections that speak garbage instead of multistream-select."""
    parts = target.split("/")
    ip, port = parts[parts.index("ip4") + 1], int(parts[parts.index("tcp") + 1])
    outcome = {"sent": 0, "closed_by_node": 0}
    still_open: dict[str, int] = {}
    limit = trio.Semaphore(32)

    async def one(i: int) -> None:
        async with limit:
            with trio.move_on_after(PATIENCE_S) as scope:  # the node's handshake deadline is 5 s
                stream = await trio.open_tcp_stream(ip, port)
                try:
                    await stream.send_all(JUNK[i % len(JUNK)] * 8)
                    outcome["sent"] += 1
                    while await stream.receive_some(4096):
                        pass
                    outcome["closed_by_node"] += 1
                except (trio.BrokenResourceError, OSError):
                    outcome["closed_by_node"] += 1
                finally:
                    await stream.aclose()
            if scope.cancelled_caught:
                kind = JUNK[i % len(JUNK)].hex()
                still_open[kind] = still_open.get(kind, 0) + 1

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    emit("tcp-junk", still_open=still_open, **outcome)


async def drip(host: Host, target: str, seconds: int) -> None:
    """A frame announcing 64 bytes, sent one byte a second; report when the node cut the stream."""
    channel = await host.open_channel(
        peer_of(target), PROFILE, addrs=(target,), timeout=PATIENCE_S, read_timeout=PATIENCE_S
    )
    start = time.monotonic()
    sent, cut = 0, False
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal cut
                try:
                    await channel.receive()
                except (NodeError, ProtocolError):
                    cut = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await channel.send_raw(b"\x40")  # the header: 64 bytes follow
            while True:
                await trio.sleep(1)  # the attack itself: one byte a second
                try:
                    await channel.send_raw(b"\x81")
                    sent += 1
                except NodeError:
                    cut = True
                    break
    emit("drip", cut=cut, after_s=round(time.monotonic() - start, 1), bytes_sent=sent)


async def main(args: argparse.Namespace) -> None:
    """Run one mode against the target."""
    if args.mode == "tcp-junk":
        await tcp_junk(args.target, args.count)
        return
    config = HostConfig(key_file=None, max_streams=1 << 16)
    async with open_host(config) as host:
        if args.mode == "ping":
            await ping(host, args.target)
        elif args.mode == "streams":
            await hold_streams(host, args.target, args.count)
        elif args.mode == "junk":
            await junk(host, args.target, args.count)
        else:
            await drip(host, args.target, args.count)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["ping", "streams", "junk", "tcp-junk", "drip"])
    parser.add_argument("--target", required=True)
    parser.add_argument("--count", type=int, default=1)
    trio.run(main, parser.parse_args())
