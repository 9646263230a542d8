"""The vantage point's round trip to a server: TCP's handshake (and the TLS handshake for https).

Measured on raw trio sockets, outside any HTTP client, several samples, median reported. It sits
beside TTFT so that one endpoint measured from many places can be compared (a far vantage point
pays its round trip at least twice before the first token: connect, then request and response).

Each connect's round trip is the kernel's (Linux: `TCP_INFO`'s `tcpi_rtt`, the handshake's sample,
timed where the SYN left and its SYN-ACK came back), not the time this process took to see the
connect done: on a busy machine that wait is the scheduler's. A worker beside the suite at load 4
timed its connects to a stub on loopback at a median of 28.4 ms, and a record of the same run whose
first token came 10.6 ms after its send (kernel-stamped, `http1.kernel_stamps`) was refused as quicker
than half that round trip (`scheduler.verification.sendcheck.physics_problems`); the kernel's round
trip on loopback is some microseconds. Where the kernel does not say (another system, a handshake
whose SYN was sent again, which Karn's rule leaves unsampled), the connect's own time on the
monotonic clock stands in. The TLS handshake is timed by this process (several round trips and the
crypto's work: the client's time).
"""

from __future__ import annotations

import socket
import ssl
import statistics
import struct
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import trio

SAMPLE_TIMEOUT_S: Final = 5.0
TCPI_RTT_AT: Final = 68
"""Where Linux's `struct tcp_info` holds `tcpi_rtt` (microseconds, u32): after 8 one-byte fields and 15
u32s (`include/uapi/linux/tcp.h`, unchanged since 2.6)."""
TCP_INFO_BYTES: Final = 104
"""The part of `struct tcp_info` asked for: every kernel since 2.6 gives at least this much."""
_AddrInfo = tuple[Any, Any, Any, str, Any]


@dataclass(frozen=True)
class Rtt:
    """Round-trip figures from this vantage point, medians in milliseconds.

    Attributes:
        connect_ms: median round trip of TCP's handshake (the kernel's, else the connect's time), None
            if no connection succeeded.
        tls_ms: median TLS handshake time after connect (https only), None otherwise.
        samples: how many connects succeeded.
        error: why a figure is missing (the last failure), "" when none.
    """

    connect_ms: float | None
    tls_ms: float | None
    samples: int
    error: str = ""


async def measure_rtt(url: str, *, connect_ip: str | None = None, samples: int = 5) -> Rtt:
    """Connect `samples` times to the URL's host and port (or to `connect_ip`), each under a deadline.

    Never raises for a network failure: the figures it could not take are None, with the reason.
    """
    parts = urlsplit(url)
    host, https = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    connects: list[float] = []
    handshakes: list[float] = []
    error = ""
    try:
        with trio.fail_after(SAMPLE_TIMEOUT_S):
            infos = await trio.socket.getaddrinfo(connect_ip or host, port, type=trio.socket.SOCK_STREAM)
    except (OSError, trio.TooSlowError) as exc:
        return Rtt(None, None, 0, f"resolving {host}: {_cause(exc)}")
    for _ in range(samples):
        try:
            with trio.fail_after(SAMPLE_TIMEOUT_S):
                connect, tls = await _sample(infos[0], host if https else None)
        except (OSError, trio.TooSlowError) as exc:
            error = f"connecting: {_cause(exc)}"
            continue
        connects.append(connect)
        if isinstance(tls, float):
            handshakes.append(tls)
        elif tls:
            error = tls
    return Rtt(
        connect_ms=statistics.median(connects) if connects else None,
        tls_ms=statistics.median(handshakes) if handshakes else None,
        samples=len(connects),
        error=error,
    )


async def _sample(info: _AddrInfo, tls_host: str | None) -> tuple[float, float | str | None]:
    """One connect and handshake on the monotonic clock: (connect ms, handshake ms or why it failed)."""
    family, type_, proto, _, sockaddr = info
    sock = trio.socket.socket(family, type_, proto)
    try:
        began = time.perf_counter_ns()
        await sock.connect(sockaddr)
        connect_ms = kernel_rtt_ms(sock) or (time.perf_counter_ns() - began) / 1e6
        if tls_host is None:
            return connect_ms, None
        tls = trio.SSLStream(trio.SocketStream(sock), ssl.create_default_context(), server_hostname=tls_host)
        began = time.perf_counter_ns()
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:
            return connect_ms, f"TLS handshake: {_cause(exc.__cause__ or exc)}"
        return connect_ms, (time.perf_counter_ns() - began) / 1e6
    finally:
        sock.close()


def kernel_rtt_ms(sock: trio.socket.SocketType) -> float | None:
    """The kernel's round trip of a connected TCP socket in ms (Linux `TCP_INFO`), None where it does
    not say (no `TCP_INFO`, a short answer, or no sample: 0)."""
    option = getattr(socket, "TCP_INFO", None)
    if option is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, TCP_INFO_BYTES)
    except OSError:
        return None
    if len(info) < TCPI_RTT_AT + 4:
        return None
    (rtt_us,) = struct.unpack_from("=I", info, TCPI_RTT_AT)
    return rtt_us / 1000 if rtt_us else None


def _cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


__all__ = ["Rtt", "kernel_rtt_ms", "measure_rtt"]
