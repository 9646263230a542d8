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
import ipaddress
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final, final
from urllib.parse import urljoin, urlsplit

import h11
import trio

from node.errors import NodeError
from protocol import FailureReason

MAX_REDIRECTS: Final = 3
READ_SIZE: Final = 64 * 1024
WRITE_BATCH: Final = 1 << 20
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")
_HOST_NAME_RE: Final = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")
_NUMERIC_LABEL_RE: Final = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_UNSAFE_CHARS_RE: Final = re.compile(r"[\x00-\x20\x7f\\]")
# IPv6 ranges that embed or translate an IPv4 address: the address behind them is not the one checked.
_EMBEDDING_V6: Final = (
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64
    ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64
)

OnBytes = Callable[[int, int | None], None]


class FetchError(NodeError):
    """A model could not be fetched; `reason` is what the task's `Failure` carries.

    Attributes:
        reason: URL_REFUSED, TOO_LARGE, DIGEST_MISMATCH or FETCH.
        detail: the specific cause, for people and logs.
    """

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def _refused(detail: str) -> FetchError:
    return FetchError(FailureReason.URL_REFUSED, detail)


@dataclass(frozen=True)
class _Target:
    """A checked URL, split into what the connection needs."""

    url: str
    scheme: str
    host: str
    port: int
    request_target: str

    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@final
@dataclass(frozen=True)
class UrlPolicy:
    """Which model URLs a worker may fetch, and how much of them.

    Attributes:
        allow_http: accept plain `http` (tests, loopback servers); `https` only otherwise.
        allow_networks: CIDRs the owner explicitly allows although they are not global.
        max_bytes: cap on the body, checked on `Content-Length` and while streaming.
        timeout_s: deadline for the whole download, redirects included.
    """

    allow_http: bool = False
    allow_networks: tuple[str, ...] = ()
    max_bytes: int = 2 << 30
    timeout_s: float = 600.0
    _networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        nets = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in self.allow_networks)
        object.__setattr__(self, "_networks", nets)

    def check_url(self, url: str) -> None:
        """Refuse a URL on its text alone: scheme, userinfo, odd characters, ambiguous hosts.

        Raises:
            FetchError: reason URL_REFUSED, with why.
        """
        self._target(url)

    def check_address(self, ip: str) -> None:
        """Refuse an address that is not globally routable, unless the owner allows its network.

        Raises:
            FetchError: reason URL_REFUSED, with why.
        """
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError as exc:
            raise _refused(f"not an IP address: {ip!r}") from exc
        if any(addr.version == net.version and addr in net for net in self._networks):
            return
        why = _non_global_reason(addr)
        if why:
            raise _refused(f"address {addr} is {why}")

    def _target(self, url: str) -> _Target:
        if _UNSAFE_CHARS_RE.search(url):
            raise _refused("URL contains whitespace, control characters or a backslash")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise _refused(f"malformed URL: {exc}") from exc
        allowed = ("https", "http") if self.allow_http else ("https",)
        if parts.scheme not in allowed:
            raise _refused(f"scheme {parts.scheme!r} not allowed (only {', '.join(allowed)})")
        if "@" in parts.netloc:
            raise _refused("URL carries userinfo (user@host)")
        host = parts.hostname or ""
        self._check_host(host)
        if port == 0:
            raise _refused("port 0")
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        default_port = 443 if parts.scheme == "https" else 80
        return _Target(url, parts.scheme, host, port or default_port, target)

    def _check_host(self, host: str) -> None:
        if not host:
            raise _refused("URL has no host")
        if not host.isascii():
            raise _refused("non-ASCII host (use its punycode form)")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            self.check_address(host)
            return
        if ":" in host or "%" in host:
            raise _refused(f"malformed IPv6 literal {host!r}")
        if _NUMERIC_LABEL_RE.match(host.rstrip(".").rsplit(".", 1)[-1]):
            raise _refused(f"non-canonical numeric host {host!r} (octal, hex or short IPv4 form)")
        if len(host) > 253 or not _HOST_NAME_RE.match(host):
            raise _refused(f"malformed host name {host!r}")
        if host.rstrip(".").endswith(".localhost"):
            raise _refused(f"{host!r} is a loopback name (RFC 6761)")


def _non_global_reason(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why an address is not a public unicast one, or "" if it is."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return "IPv4-mapped IPv6"
        if addr.sixtofour is not None or addr.teredo is not None:
            return "6to4 or Teredo (embeds an IPv4 address)"
        if any(addr in net for net in _EMBEDDING_V6):
            return "IPv4-compatible or NAT64 (embeds an IPv4 address)"
        if addr.is_site_local:
            return "site-local"
    checks = (
        (addr.is_unspecified, "unspecified"),
        (addr.is_loopback, "loopback"),
        (addr.is_link_local, "link-local (cloud metadata lives here)"),
        (addr.is_multicast, "multicast"),
        (addr.is_private, "private"),
        (addr.is_reserved, "reserved"),
        (not addr.is_global, "not globally routable (e.g. CGNAT)"),
    )
    return next((why for hit, why in checks if hit), "")


@contextlib.contextmanager
def _fetch_errors(what: str) -> Iterator[None]:
    """Translate socket, TLS and HTTP errors into `FetchError(FETCH)` at this seam."""
    try:
        yield
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError) as exc:
        cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
        raise FetchError(FailureReason.FETCH, f"{what}: {type(cause).__name__}: {cause}") from exc


async def _connect(target: _Target, policy: UrlPolicy) -> trio.abc.Stream:
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


async def _response(stream: trio.abc.Stream, target: _Target) -> tuple[h11.Connection, h11.Response]:
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
