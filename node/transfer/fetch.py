"""Model download by URL, guarded against SSRF, endless bodies and tampered bytes.

No third-party HTTP client and no environment: the host is resolved with `trio.socket.getaddrinfo`,
every resolved address is checked against `UrlPolicy`, and the connection goes to the checked
address itself (no second resolution, so DNS rebinding cannot swap it). HTTP/1.1 is spoken with h11,
TLS through `trio.SSLStream` with SNI set to the URL's host. `*_proxy` variables are never read.
Redirects (at most 3) go through the same checks. The body streams into a temp file beside `dest`,
capped on `Content-Length` and while streaming; its sha256 is checked before the file is moved into
place, and the temp file is removed on any failure (cancellation included).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final, final
from urllib.parse import urljoin

import h11
import trio

from node.transfer.urls import FetchError, Target, UrlPolicy
from protocol import FailureReason

MAX_REDIRECTS: Final = 3
READ_SIZE: Final = 64 * 1024
WRITE_BATCH: Final = 1 << 20
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})

OnBytes = Callable[[int, int | None], None]
SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")


@contextlib.contextmanager
def _fetch_errors(what: str) -> Iterator[None]:
    """Translate socket, TLS and HTTP errors into `FetchError(FETCH)` at this seam."""
    try:
        yield
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError) as exc:
        cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
        raise FetchError(FailureReason.FETCH, f"{what}: {type(cause).__name__}: {cause}") from exc


async def _connect(target: Target, policy: UrlPolicy) -> trio.abc.Stream:
    """Resolve, check every address, and connect to a checked one (TLS for https)."""
    with _fetch_errors(f"resolving {target.host}"):
        infos = await trio.socket.getaddrinfo(target.host, target.port, type=trio.socket.SOCK_STREAM)
    if not infos:
        raise FetchError(FailureReason.FETCH, f"{target.host} resolved to no address")
    for info in infos:
        policy.check_address(str(info[4][0]))
    last: FetchError | None = None
    for family, type_, proto, _, sockaddr in infos:
        sock = trio.socket.socket(family, type_, proto)
        try:
            with _fetch_errors(f"connecting to {sockaddr[0]} port {target.port}"):
                await sock.connect(sockaddr)
        except FetchError as exc:
            sock.close()
            last = exc
            continue
        stream: trio.abc.Stream = trio.SocketStream(sock)
        if target.scheme == "https":
            context = ssl.create_default_context()
            tls = trio.SSLStream(stream, context, server_hostname=target.host, https_compatible=True)
            with _fetch_errors(f"TLS handshake with {target.host}"):
                await tls.do_handshake()
            stream = tls
        return stream
    assert last is not None
    raise last


async def _response(stream: trio.abc.Stream, target: Target) -> tuple[h11.Connection, h11.Response]:
    """Send the GET and read up to the response head."""
    conn = h11.Connection(h11.CLIENT)
    headers = [
        ("Host", target.host_header()),
        ("User-Agent", "sark-node"),
        ("Accept-Encoding", "identity"),
        ("Connection", "close"),
    ]
    request = conn.send(h11.Request(method="GET", target=target.request_target, headers=headers))
    with _fetch_errors(f"GET {target.url}"):
        await stream.send_all(request + (conn.send(h11.EndOfMessage()) or b""))
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(READ_SIZE))
            elif isinstance(event, h11.Response):
                return conn, event
            elif not isinstance(event, h11.InformationalResponse):
                raise FetchError(FailureReason.FETCH, f"no response from {target.host}: {event!r}")


def _header(response: h11.Response, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in response.headers if k == name), None)


def _content_length(response: h11.Response, cap: int) -> int | None:
    raw = _header(response, b"content-length")
    if raw is None:
        return None
    length = int(raw)  # h11 has validated it
    if length > cap:
        raise FetchError(FailureReason.TOO_LARGE, f"Content-Length {length} exceeds the cap of {cap} bytes")
    return length


@final
class _Sink:
    """The temp file beside `dest` plus a running sha256; writes and hashing run in a thread."""

    def __init__(self, file: BinaryIO, path: Path) -> None:
        self.path = path
        self.size = 0
        self._file = file
        self._hash = hashlib.sha256()
        self._buffer = bytearray()

    @classmethod
    async def open(cls, dest: Path) -> _Sink:
        def create() -> _Sink:
            fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
            return cls(os.fdopen(fd, "wb"), Path(name))

        return await trio.to_thread.run_sync(create)

    async def write(self, data: bytes) -> None:
        self._buffer += data
        self.size += len(data)
        if len(self._buffer) >= WRITE_BATCH:
            await self.flush()

    async def flush(self) -> None:
        chunk, self._buffer = bytes(self._buffer), bytearray()
        if chunk:
            await trio.to_thread.run_sync(self._write_sync, chunk)

    def _write_sync(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self._hash.update(chunk)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def discard(self) -> None:
        """Close and delete the temp file; synchronous, so it also runs under cancellation."""
        self._file.close()
        self.path.unlink(missing_ok=True)

    async def finish(self, dest: Path) -> None:
        await self.flush()
        await trio.to_thread.run_sync(self._close_into, dest)

    def _close_into(self, dest: Path) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.path, dest)


async def _body(
    conn: h11.Connection,
    stream: trio.abc.Stream,
    sink: _Sink,
    total: int | None,
    cap: int,
    on_bytes: OnBytes | None,
) -> None:
    """Stream the body into `sink`, stopping at the first read (<= 64 KiB) that crosses `cap`."""
    received = 0
    with _fetch_errors("reading the body"):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(READ_SIZE))
            elif isinstance(event, h11.Data):
                received += len(event.data)
                if on_bytes is not None:
                    on_bytes(received, total)
                if received > cap:
                    raise FetchError(FailureReason.TOO_LARGE, f"body passed the cap of {cap} bytes")
                await sink.write(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise FetchError(FailureReason.FETCH, f"connection ended inside the body: {event!r}")


async def _get(url: str, sink: _Sink, policy: UrlPolicy, on_bytes: OnBytes | None) -> None:
    """Follow at most `MAX_REDIRECTS` redirects, checking each hop, and stream the final body."""
    for _ in range(MAX_REDIRECTS + 1):
        target = policy._target(url)
        stream = await _connect(target, policy)
        try:
            conn, response = await _response(stream, target)
            if response.status_code in REDIRECT_STATUSES:
                location = _header(response, b"location")
                if not location:
                    raise FetchError(FailureReason.FETCH, f"HTTP {response.status_code} without Location")
                url = urljoin(url, location)
                continue
            if response.status_code != 200:
                raise FetchError(FailureReason.FETCH, f"HTTP {response.status_code} from {target.host}")
            total = _content_length(response, policy.max_bytes)
            await _body(conn, stream, sink, total, policy.max_bytes, on_bytes)
            return
        finally:
            await trio.aclose_forcefully(stream)
    raise FetchError(FailureReason.FETCH, f"more than {MAX_REDIRECTS} redirects")


async def download(
    url: str,
    dest: Path,
    *,
    sha256: str | None,
    policy: UrlPolicy,
    on_bytes: OnBytes | None = None,
) -> tuple[str, int]:
    """Download `url` to `dest` under `policy`; `dest` appears only once whole and verified.

    Args:
        url: an http(s) URL; checked, and so is every redirect.
        dest: final path; a temp file beside it takes the bytes until they are verified.
        sha256: expected lowercase hex digest, or None to accept any (the digest is returned).
        policy: scheme, address, size and time limits.
        on_bytes: called with (bytes so far, Content-Length or None) as the body arrives.

    Returns:
        The body's sha256 (lowercase hex) and its size in bytes.

    Raises:
        FetchError: URL_REFUSED, TOO_LARGE, DIGEST_MISMATCH, or FETCH (HTTP status, timeout, connection).
    """
    if sha256 is not None and not SHA256_RE.match(sha256):
        raise ValueError(f"sha256 must be 64 lowercase hex digits, got {sha256!r}")
    policy.check_url(url)
    sink = await _Sink.open(dest)
    try:
        with trio.fail_after(policy.timeout_s):
            await _get(url, sink, policy, on_bytes)
            await sink.flush()
    except trio.TooSlowError as exc:
        sink.discard()
        raise FetchError(FailureReason.FETCH, f"download not finished within {policy.timeout_s:g} s") from exc
    except BaseException:
        sink.discard()
        raise
    digest = sink.hexdigest()
    if sha256 is not None and digest != sha256:
        sink.discard()
        raise FetchError(FailureReason.DIGEST_MISMATCH, f"expected sha256 {sha256}, got {digest}")
    try:
        await sink.finish(dest)
    except BaseException:
        sink.discard()
        raise
    return digest, sink.size


__all__ = ["FetchError", "OnBytes", "UrlPolicy", "download"]
