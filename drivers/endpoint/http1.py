"""HTTP/1.1 for the endpoint client: trio sockets and h11, every read stamped where its bytes arrived.

A `Pool` keeps idle keep-alive connections per server and opens new ones as needed (TCP, or TLS
verified against the platform's trust store, SNI and Host from the URL even when the address is
pinned). Each read is stamped before anything parses it: on Linux with the kernel's receive time of
the socket's last packet (`SO_TIMESTAMPNS`), mapped onto `time.perf_counter_ns` by how long ago it
was, so a read that waited while the event loop served other requests is still stamped when its
bytes came in; elsewhere with `perf_counter_ns` when the read returns. `Exchange.send` stamps the
moment the request's first byte is written, after a connection was taken.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

import h11
import trio

READ_BYTES: Final = 65536
MAX_STAMP_LAG_NS: Final = 10 * 10**9  # a kernel stamp further back than this is a clock step: not used
_TIMESTAMPNS: Final = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_STAMP_SPACE: Final = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
STAMPS_ON_S: Final = 2.0
"""The longest `kernel_stamps` waits for the kernel to stamp received packets."""


class StampedStream(trio.abc.HalfCloseableStream):
    """A TCP stream whose every read records when its bytes arrived (`arrived_ns`, perf clock).

    It drives the socket itself: a read waits until the socket is readable, then reads once (trio's
    own stream tries first and waits on the refusal, a system call more per read of a stream).
    """

    def __init__(self, tcp: trio.SocketStream) -> None:
        self.sock = socket.socket(fileno=tcp.socket.detach())
        self.sock.setblocking(False)
        self.stamped = False
        if _TIMESTAMPNS is not None and _STAMP_SPACE:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, _TIMESTAMPNS, 1)
                self.stamped = True
            except OSError:
                pass
        self.arrived_ns = 0
        self.read_ns = 0  # when the last read returned (the stamp when the kernel's cannot be used)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while True:
            await trio.lowlevel.wait_readable(self.sock.fileno())
            try:
                if not self.stamped:
                    data = self.sock.recv(max_bytes or READ_BYTES)
                    self.arrived_ns = self.read_ns = time.perf_counter_ns()
                    return data
                data, ancdata, _, _ = self.sock.recvmsg(max_bytes or READ_BYTES, _STAMP_SPACE)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            self.read_ns = time.perf_counter_ns()
            self.arrived_ns = _arrival(ancdata, self.read_ns)
            return data

    def waiting(self) -> bool:
        """Whether bytes (or the end of the stream) wait in the socket to be read now."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)  # data, or b"" at the end: either is there to read
        except BlockingIOError:
            return False
        except OSError:
            return True  # the next read reports it
        return True

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock.fileno())
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.wait_writable(self.sock.fileno())

    async def send_eof(self) -> None:
        await trio.lowlevel.checkpoint()
        self.sock.shutdown(socket.SHUT_WR)

    async def aclose(self) -> None:
        if self.sock.fileno() >= 0:
            trio.lowlevel.notify_closing(self.sock.fileno())
            self.sock.close()
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def kernel_stamps() -> AsyncIterator[bool]:
    """Received packets stamped by the kernel for the whole block; whether they are.

    Linux stamps a received packet only while some socket asks (`SO_TIMESTAMPNS`: the static key
    `netstamp_needed`), and the first socket to ask turns it on later, in a work item: until that
    ran, packets arrive unstamped and a TCP read gets no stamp, so the client takes the read's own
    time. Measured here on a system with no other stamping socket: the first read after the option
    was set had no stamp, the next did; under load the work item runs later still (CI at 0e0b20c: a
    chunk that came while the client parsed was stamped when read, 0.1 ms after the parse). So the
    client holds a loopback TCP pair of its own with the option on for the whole run, and first
    waits (at most `STAMPS_ON_S`) until a byte sent across it is read with a stamp: from then on,
    every packet is stamped, the first token's included. False where the platform has no such
    stamp, or none came within the wait: the reads then take their own time, as documented.
    """
    if _TIMESTAMPNS is None or not _STAMP_SPACE:
        yield False
        return
    pair = _stamped_pair(_TIMESTAMPNS)
    if pair is None:
        yield False
        return
    sender, receiver = pair
    try:
        on = False
        with trio.move_on_after(STAMPS_ON_S):
            while not on:
                sender.send(b"x")
                await trio.lowlevel.wait_readable(receiver.fileno())
                _, ancdata, _, _ = receiver.recvmsg(64, _STAMP_SPACE)
                on = any(level == socket.SOL_SOCKET and kind == _TIMESTAMPNS for level, kind, _ in ancdata)
                if not on:
                    await trio.sleep(0.001)  # the work item turns it on: give it the CPU
        yield on
    finally:
        sender.close()
        receiver.close()


def _stamped_pair(option: int) -> tuple[socket.socket, socket.socket] | None:
    """A connected loopback TCP pair, the receiving side asking for `option` (`SO_TIMESTAMPNS`; None
    if refused)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            receiver = socket.create_connection(listener.getsockname(), timeout=5.0)
            sender, _ = listener.accept()
    except OSError:
        return None
    try:
        receiver.setsockopt(socket.SOL_SOCKET, option, 1)
    except OSError:
        receiver.close()
        sender.close()
        return None
    receiver.setblocking(False)
    sender.setblocking(False)
    return sender, receiver


def _arrival(
    ancdata: list[tuple[int, int, bytes]], read_ns: int, wall: Callable[[], int] = time.time_ns
) -> int:
    """The kernel's receive time of a read's last packet on the perf clock (`read_ns`, without one).

    The kernel stamps on the wall clock; the stamp is moved onto the perf clock by how long ago it was,
    the two clocks read one after the other, the wall's first (`wall`: its reader). A pause of this
    process between the two reads (a busy machine's) then makes the arrival later than it was, never
    earlier. Read the other way round (the perf clock as the read returned, the wall's after), a worker
    beside the suite at load 4 paused some 18 ms between them and stamped a first token that much early:
    1.6 ms after its send, from a stub that waits 20 ms before it answers, refused under the server's
    floor (tests/labs/e2e/test_client_saturated.py; tests/unit/drivers/endpoint/test_kernel_stamps.py)."""
    for level, kind, raw in ancdata:
        if level == socket.SOL_SOCKET and kind == _TIMESTAMPNS and len(raw) >= 16:
            seconds, nanos = struct.unpack("qq", raw[:16])
            wall_ns = wall()
            now_ns = time.perf_counter_ns()
            lag: int = wall_ns - (seconds * 10**9 + nanos)
            if 0 <= lag < MAX_STAMP_LAG_NS:
                return now_ns - lag
    return read_ns


@dataclass(frozen=True)
class Origin:
    """Where a connection goes: scheme, host (for Host and SNI), port, and the address to dial."""

    tls: bool
    host: str
    port: int
    dial: str

    @classmethod
    def of(cls, url: str, connect_ip: str | None) -> Origin:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or ""
        return cls(tls, host, parts.port or (443 if tls else 80), connect_ip or host)


@dataclass
class Connection:
    """One keep-alive connection: its streams and h11's view of it; `reused` once it served a request."""

    raw: StampedStream
    stream: trio.abc.Stream
    h11: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))
    reused: bool = False

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


class Pool:
    """Idle connections per origin; `take` reuses one or dials a new one, `give` returns it."""

    def __init__(self) -> None:
        self._idle: dict[Origin, list[Connection]] = {}
        self._tls: ssl.SSLContext | None = None  # made at the first https connection (it costs ~40 ms)

    async def take(self, origin: Origin, *, fresh: bool = False) -> Connection:
        idle = self._idle.get(origin)
        if idle and not fresh:
            return idle.pop()
        tcp = await trio.open_tcp_stream(origin.dial, origin.port)
        raw = StampedStream(tcp)
        if not origin.tls:
            return Connection(raw, raw)
        if self._tls is None:
            self._tls = ssl.create_default_context()  # the platform's store; SSL_CERT_FILE / _DIR apply
        stream = trio.SSLStream(raw, self._tls, server_hostname=origin.host, https_compatible=True)
        await stream.do_handshake()
        return Connection(raw, stream)

    async def give(self, origin: Origin, conn: Connection) -> None:
        """Keep a connection whose exchange ended cleanly for the next request; close any other."""
        state = conn.h11
        if state.our_state is h11.DONE and state.their_state is h11.DONE:
            state.start_next_cycle()
            conn.reused = True
            self._idle.setdefault(origin, []).append(conn)
        else:
            await conn.aclose()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                await conn.aclose()
        self._idle.clear()

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()


async def send_request(
    conn: Connection, origin: Origin, target: str, headers: list[tuple[str, str]], body: bytes
) -> int:
    """Write a whole POST request; returns the perf clock when its first byte was written."""
    host = origin.host if origin.port == (443 if origin.tls else 80) else f"{origin.host}:{origin.port}"
    if ":" in origin.host and not host.startswith("["):
        host = f"[{origin.host}]" if host == origin.host else f"[{origin.host}]:{origin.port}"
    head = [("host", host), ("content-type", "application/json"), ("content-length", str(len(body)))]
    state = conn.h11
    data = state.send(h11.Request(method="POST", target=target, headers=head + headers))
    data = (data or b"") + (state.send(h11.Data(data=body)) or b"") + (state.send(h11.EndOfMessage()) or b"")
    sent_ns = time.perf_counter_ns()
    await conn.stream.send_all(data)
    return sent_ns


async def next_event(conn: Connection, not_before: int = 0) -> tuple[object, int]:
    """h11's next event and the arrival stamp of the read it came from (reads as needed). A kernel
    stamp before `not_before` (the request's first byte: a wall-clock step between the kernel's
    stamp and ours) is not used: the read's own time is."""
    state = conn.h11
    while True:
        event = state.next_event()
        if event is not h11.NEED_DATA:
            raw = conn.raw
            return event, raw.arrived_ns if raw.arrived_ns >= not_before else raw.read_ns
        data = await conn.stream.receive_some(READ_BYTES)
        state.receive_data(data)


__all__ = ["Connection", "Origin", "Pool", "StampedStream", "kernel_stamps", "next_event", "send_request"]
