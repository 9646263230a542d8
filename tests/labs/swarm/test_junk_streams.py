"""Issue 23, bounded protocol: junk or silence on any of a node's protocols ends that stream at once.

A real gate and a real `join` worker (child processes, loopback); an in-process libp2p host opens
one stream per case on each protocol and sends a 4 GiB length prefix, truncated msgpack, malformed
msgpack, an unknown kind, or nothing at all. The node must end every such stream by itself (reset:
the read raises; or closed: EOF): the mechanism is asserted, the time is printed. The per-case
wait is a deadline on the test (10 s), never a speed claim; the node's first-frame deadline is
0.5 s here (`SARK_FIRST_FRAME_S`), 5 s by default.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
from kit.procs import Lab

from node.errors import NodeError
from node.p2p.host import Host, HostConfig, open_host, peer_of
from protocol import BLOB, KAD, NEGOTIATE, PROFILE, REACH

JUNK: dict[str, bytes] = {
    "4 GiB length prefix": b"\xff\xff\xff\xff\x0f",
    "truncated msgpack": b"\x06\x82\xa4kind\xa5",  # a map of 2 whose first value stops short
    "malformed msgpack": b"\x01\xc1",  # 0xc1 is never valid msgpack
    "unknown kind": b"\x0b\x81\xa4kind\xa4nope",
    "nothing at all": b"",
}
CASE_DEADLINE_S = 10.0


async def _ended(host: Host, target: str, protocol: str, junk: bytes) -> tuple[str, float]:
    """Send `junk` on a new stream and wait until the node ends it: ("reset" | "eof", seconds)."""
    channel = await host.open_channel(peer_of(target), protocol, addrs=(target,), timeout=10)
    start = time.monotonic()
    if junk:
        await channel.send_raw(junk)
    with trio.move_on_after(CASE_DEADLINE_S):
        try:
            while await channel.receive_raw(timeout=CASE_DEADLINE_S):
                pass  # nothing the node says to junk matters; only that it ends the stream
            return "eof", time.monotonic() - start
        except NodeError:
            return "reset", time.monotonic() - start
        finally:
            await channel.reset()
    return "open", time.monotonic() - start


@pytest.mark.trio_deadline(200)
async def test_junk_and_silence_end_the_stream_on_every_protocol(
    lab: Lab, profile_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SARK_FIRST_FRAME_S", "0.5")
    gate = lab.gate()
    worker = lab.worker("worker", gate.ready["addrs"], profile_file)
    targets = {
        NEGOTIATE: worker.ready["addrs"][0],
        PROFILE: worker.ready["addrs"][0],
        BLOB: worker.ready["addrs"][0],
        REACH: worker.ready["addrs"][0],
        f"gate {REACH}": gate.ready["addrs"][0],
    }
    outcomes: dict[tuple[str, str], tuple[str, float]] = {}
    async with open_host(HostConfig(key_file=None)) as host:
        for protocol, target in targets.items():
            for case, junk in JUNK.items():
                outcomes[protocol, case] = await _ended(host, target, protocol.split()[-1], junk)
    for (protocol, case), (how, seconds) in outcomes.items():
        print(f"{protocol:28} {case:22} {how:5} {seconds * 1000:7.1f} ms")
    still_open = {key: value for key, value in outcomes.items() if value[0] == "open"}
    assert not still_open, still_open
    assert worker.popen.poll() is None
    assert gate.popen.poll() is None


async def test_kad_junk_and_silence_do_not_hold_the_stream(lab: Lab) -> None:
    """The gate's kad-dht (libp2p's own handler on our protocol id) ends junk and silent streams too:
    libp2p alone held a silent one for 40 s and more, with one of the server's inbound tokens."""
    gate = lab.gate()
    target = gate.ready["addrs"][0]
    outcomes: dict[str, tuple[str, float]] = {}
    async with open_host(HostConfig(key_file=None)) as host:
        for case, junk in JUNK.items():
            outcomes[case] = await _ended(host, target, KAD, junk)  # silence: cut at FIRST_FRAME_S (5 s)
    print(outcomes)
    assert all(how != "open" for how, _ in outcomes.values()), outcomes
    assert gate.popen.poll() is None
