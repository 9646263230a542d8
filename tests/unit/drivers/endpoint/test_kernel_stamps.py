"""The kernel stamps every packet the endpoint client reads, its first read's included.

Linux stamps a received packet only while some socket asks (`SO_TIMESTAMPNS`), and the first socket
to ask turns the stamping on later, in a work item: until it ran, a TCP read gets no stamp and the
client takes the read's own time (CI at 0e0b20c: a chunk that came while the client parsed was
stamped when read). `http1.kernel_stamps` holds a socket of its own that asks, and waits until a byte
comes back stamped; inside it, a fresh connection's first read is stamped.
"""

from __future__ import annotations

import sys
import time

import pytest
import trio

from drivers.endpoint import http1

pytestmark = pytest.mark.skipif(
    sys.platform != "linux",
    reason="SO_TIMESTAMPNS is Linux only (a read elsewhere takes its own time)",
)


def _stamped(ancdata: list[tuple[int, int, bytes]]) -> bool:
    return any(kind == http1._TIMESTAMPNS for _, kind, _ in ancdata)


async def test_inside_kernel_stamps_a_fresh_connections_first_read_is_stamped() -> None:
    option = http1._TIMESTAMPNS
    assert option is not None
    async with http1.kernel_stamps() as on:
        assert on
        for _ in range(3):  # each a fresh connection: its very first read
            pair = http1._stamped_pair(option)
            assert pair is not None
            sender, receiver = pair
            with sender, receiver:
                sender.send(b"first token")
                await trio.lowlevel.wait_readable(receiver.fileno())
                data, ancdata, _, _ = receiver.recvmsg(64, http1._STAMP_SPACE)
            assert data == b"first token"
            assert _stamped(ancdata)


async def test_its_own_sockets_are_closed_when_the_block_ends() -> None:
    import psutil

    before = len(psutil.Process().net_connections(kind="tcp"))
    async with http1.kernel_stamps():
        assert len(psutil.Process().net_connections(kind="tcp")) == before + 2
    assert len(psutil.Process().net_connections(kind="tcp")) == before


PAUSE_S = 0.05
"""A pause of the reading process (a busy machine's) before it reads the wall clock."""


async def test_a_pause_before_the_clocks_are_read_never_makes_an_arrival_early() -> None:
    """A packet cannot arrive before it was sent: its arrival on the perf clock is after the send's
    perf time whatever this process did between the read and the clocks' reads (CI-like weather, the
    suite at load 4: a first token stamped 18 ms early and refused under a server's floor)."""

    def paused_wall() -> int:
        time.sleep(PAUSE_S)  # the process held before it reads the clock
        return time.time_ns()

    option = http1._TIMESTAMPNS
    assert option is not None
    async with http1.kernel_stamps():
        pair = http1._stamped_pair(option)
        assert pair is not None
        sender, receiver = pair
        with sender, receiver:
            sent_ns = time.perf_counter_ns()
            sender.send(b"first token")
            await trio.lowlevel.wait_readable(receiver.fileno())
            _, ancdata, _, _ = receiver.recvmsg(64, http1._STAMP_SPACE)
            read_ns = time.perf_counter_ns()
    assert _stamped(ancdata)
    arrived_ns = http1._arrival(ancdata, read_ns, paused_wall)
    after_ns = time.perf_counter_ns()
    # and never in the future: no bound from the pause's length, which a busy machine stretches
    assert sent_ns <= arrived_ns <= after_ns
