"""URL policy and downloader against real loopback servers (T10, T11, T12).

Every server is a real trio TCP server on 127.0.0.x or ::1 with a port picked by the kernel. A canary
counts every accepted connection: hostile URLs must be refused before any connection reaches it.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from kit.tlscert import self_signed

from node.transfer.fetch import FetchError, UrlPolicy, download
from protocol import FailureReason

Route = Callable[[trio.abc.Stream], Awaitable[None]]
DEADLINE = 20.0
LOOPBACK_OK = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",))


@dataclass
class Server:
    """A tiny HTTP/1.1 server: one route per path, raw bytes out, every accepted connection counted."""

    host: str
    routes: dict[str, Route] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None
    port: int = 0
    hits: int = 0
    requests: list[bytes] = field(default_factory=list)

    def url(self, path: str = "/", scheme: str = "http") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}{path}"

    async def start(self, nursery: trio.Nursery) -> Server:
        """Listen (the socket accepts from here on), then serve in `nursery`."""
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, self._handle, listeners)
        return self

    async def _handle(self, raw: trio.SocketStream) -> None:
        self.hits += 1
        stream: trio.abc.Stream = raw
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if self.tls is not None:
                stream = trio.SSLStream(raw, self.tls, server_side=True)
                await stream.do_handshake()
            head = b""
            while b"\r\n\r\n" not in head:
                data = await stream.receive_some(65536)
                if not data:
                    return
                head += data
            self.requests.append(head)
            path = head.split(b" ", 2)[1].decode()
            route = self.routes.get(path, _status(404))
            await route(stream)
            await trio.aclose_forcefully(stream)


async def _listing(directory: Path) -> list[str]:
    return sorted(await trio.to_thread.run_sync(os.listdir, directory))


def _status(code: int, headers: str = "") -> Route:
    async def route(stream: trio.abc.Stream) -> None:
        await stream.send_all(f"HTTP/1.1 {code} X\r\nContent-Length: 0\r\n{headers}\r\n".encode())

    return route


def _body(data: bytes) -> Route:
    async def route(stream: trio.abc.Stream) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)

    return route


def _redirect(location: str) -> Route:
    return _status(302, f"Location: {location}\r\n")


async def _endless(stream: trio.abc.Stream) -> None:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    block = b"\0" * 65536
    while True:
        await stream.send_all(block)


async def _stall(stream: trio.abc.Stream) -> None:
    await trio.sleep_forever()


async def _declares_too_much(stream: trio.abc.Stream) -> None:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (10 << 30))
    await trio.sleep_forever()


async def _truncated(stream: trio.abc.Stream) -> None:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 500)


@pytest.fixture
async def canary(nursery: trio.Nursery) -> Server:
    server = Server("127.0.0.1", routes={"/": _body(b"canary")})
    await server.start(nursery)
    return server


@pytest.fixture
async def canary6(nursery: trio.Nursery) -> Server:
    server = Server("::1", routes={"/": _body(b"canary")})
    await server.start(nursery)
    return server


@pytest.fixture
async def origin(nursery: trio.Nursery) -> Server:
    server = Server("127.0.0.1")
    await server.start(nursery)
    return server


HOSTILE = [
    "http://127.0.0.1:{p}/",
    "http://127.1:{p}/",
    "http://2130706433:{p}/",
    "http://0x7f.1:{p}/",
    "http://0x7f000001:{p}/",
    "http://0177.0.0.1:{p}/",
    "http://127.000.000.001:{p}/",
    "http://0:{p}/",
    "http://0.0.0.0:{p}/",
    "http://localhost:{p}/",
    "http://LocalHost:{p}/",
    "http://foo.localhost:{p}/",
    "http://[::1]:{p6}/",
    "http://[::]:{p6}/",
    "http://[::ffff:127.0.0.1]:{p}/",
    "http://[::ffff:7f00:1]:{p}/",
    "http://[::127.0.0.1]:{p}/",
    "http://[64:ff9b::7f00:1]:{p}/",
    "http://[2002:7f00:1::]:{p}/",
    "http://[fe80::1]:{p}/",
    "http://[fc00::1]:{p}/",
    "http://[fec0::1]:{p}/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1:{p}/",
    "http://192.168.1.1:{p}/",
    "http://172.16.0.1:{p}/",
    "http://100.64.0.1:{p}/",
    "http://224.0.0.1:{p}/",
    "http://240.0.0.1:{p}/",
    "http://255.255.255.255:{p}/",
    "file:///etc/passwd",
    "ftp://127.0.0.1:{p}/model.onnx",
    "gopher://127.0.0.1:{p}/_GET",
    "data:text/plain,hello",
    "http://user:pw@127.0.0.1:{p}/",
    "http://example.org@127.0.0.1:{p}/",
    "http://example.org:80@127.0.0.1:{p}/",
    "http://127.0.0.1:{p}\\@example.org/",
    "http://127.0.0.1:{p} /",
    "http://127.0.0.1%09:{p}/",
    "http:///model.onnx",
    "http://127.0.0.1:0/",
]


@pytest.mark.parametrize("template", HOSTILE)
async def test_hostile_url_refused_before_any_connection(
    template: str, canary: Server, canary6: Server, tmp_path: Path
) -> None:
    url = template.format(p=canary.port, p6=canary6.port)
    policy = UrlPolicy(allow_http=True)  # plain http allowed, so the address rules are what refuse
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(url, tmp_path / "model", sha256=None, policy=policy)
    assert info.value.reason is FailureReason.URL_REFUSED
    assert (canary.hits, canary6.hits) == (0, 0)
    assert await _listing(tmp_path) == []


async def test_https_only_by_default(canary: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchError) as info:
        await download(
            canary.url(), tmp_path / "m", sha256=None, policy=UrlPolicy(allow_networks=("127.0.0.0/8",))
        )
    assert info.value.reason is FailureReason.URL_REFUSED
    assert "scheme" in info.value.detail
    assert canary.hits == 0


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{p}/",
        "http://localhost:{p}/",
        "file:///etc/passwd",
        "http://[::ffff:127.0.0.1]:{p}/",
    ],
)
async def test_redirect_to_a_refused_target(
    target: str, canary: Server, nursery: trio.Nursery, tmp_path: Path
) -> None:
    redirector = Server("127.0.0.2", routes={"/m": _redirect(target.format(p=canary.port))})
    await redirector.start(nursery)
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.2/32",))
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(redirector.url("/m"), tmp_path / "m", sha256=None, policy=policy)
    assert info.value.reason is FailureReason.URL_REFUSED
    assert (redirector.hits, canary.hits) == (1, 0)
    assert await _listing(tmp_path) == []


async def test_download_checks_sha256_and_reports_progress(origin: Server, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    origin.routes["/model.onnx"] = _body(data)
    seen: list[tuple[int, int | None]] = []
    digest = hashlib.sha256(data).hexdigest()
    with trio.fail_after(DEADLINE):
        got = await download(
            origin.url("/model.onnx"), tmp_path / "m", sha256=digest, policy=LOOPBACK_OK,
            on_bytes=lambda done, total: seen.append((done, total)),
        )  # fmt: skip
    assert got == (digest, len(data))
    assert await trio.Path(tmp_path / "m").read_bytes() == data
    assert seen[-1] == (len(data), len(data))
    assert await _listing(tmp_path) == ["m"]
    assert b"Host: 127.0.0.1:%d\r\n" % origin.port in origin.requests[0]


async def test_redirects_followed_up_to_three(origin: Server, tmp_path: Path) -> None:
    origin.routes["/data"] = _body(b"payload")
    for hop in range(1, 5):
        origin.routes[f"/r{hop}"] = _redirect(f"/r{hop - 1}" if hop > 1 else "/data")
    with trio.fail_after(DEADLINE):
        got = await download(origin.url("/r3"), tmp_path / "m", sha256=None, policy=LOOPBACK_OK)
        assert got == (hashlib.sha256(b"payload").hexdigest(), 7)
        with pytest.raises(FetchError) as info:
            await download(origin.url("/r4"), tmp_path / "n", sha256=None, policy=LOOPBACK_OK)
    assert info.value.reason is FailureReason.FETCH
    assert "redirects" in info.value.detail
    assert await _listing(tmp_path) == ["m"]


async def test_digest_mismatch_leaves_no_file(origin: Server, tmp_path: Path) -> None:
    data = os.urandom(100_000)
    origin.routes["/m"] = _body(data)
    wrong = hashlib.sha256(data + b"!").hexdigest()
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(origin.url("/m"), tmp_path / "m", sha256=wrong, policy=LOOPBACK_OK)
    assert info.value.reason is FailureReason.DIGEST_MISMATCH
    assert await _listing(tmp_path) == []


async def test_endless_body_stops_at_the_cap(origin: Server, tmp_path: Path) -> None:
    origin.routes["/m"] = _endless
    cap = 1 << 20
    seen: list[int] = []
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",), max_bytes=cap)
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(
            origin.url("/m"), tmp_path / "m", sha256=None, policy=policy, on_bytes=lambda n, _: seen.append(n)
        )
    assert info.value.reason is FailureReason.TOO_LARGE
    assert cap < seen[-1] <= cap + 64 * 1024
    assert await _listing(tmp_path) == []


async def test_content_length_over_the_cap_refused_before_the_body(origin: Server, tmp_path: Path) -> None:
    origin.routes["/m"] = _declares_too_much
    seen: list[int] = []
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(
            origin.url("/m"),
            tmp_path / "m",
            sha256=None,
            policy=LOOPBACK_OK,
            on_bytes=lambda n, _: seen.append(n),
        )
    assert info.value.reason is FailureReason.TOO_LARGE
    assert "Content-Length" in info.value.detail
    assert seen == []
    assert await _listing(tmp_path) == []


async def test_stalled_server_hits_the_overall_deadline(origin: Server, tmp_path: Path) -> None:
    origin.routes["/m"] = _stall
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",), timeout_s=0.3)
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(origin.url("/m"), tmp_path / "m", sha256=None, policy=policy)
    assert info.value.reason is FailureReason.FETCH
    assert "within 0.3 s" in info.value.detail
    assert await _listing(tmp_path) == []


@pytest.mark.parametrize(("route", "words"), [(_status(404), "HTTP 404"), (_truncated, "body")])
async def test_http_errors_are_fetch_failures(
    route: Route, words: str, origin: Server, tmp_path: Path
) -> None:
    origin.routes["/m"] = route
    with trio.fail_after(DEADLINE), pytest.raises(FetchError) as info:
        await download(origin.url("/m"), tmp_path / "m", sha256=None, policy=LOOPBACK_OK)
    assert info.value.reason is FailureReason.FETCH
    assert words in info.value.detail
    assert await _listing(tmp_path) == []


async def test_cancelled_download_removes_its_temp_file(origin: Server, tmp_path: Path) -> None:
    async def half_then_stall(stream: trio.abc.Stream) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4000000\r\n\r\n" + b"x" * 2_000_000)
        await trio.sleep_forever()

    origin.routes["/m"] = half_then_stall
    scope = trio.CancelScope()

    def cancel_midway(done: int, _total: int | None) -> None:
        if done >= 1_500_000:
            scope.cancel()

    with trio.fail_after(DEADLINE), scope:
        await download(
            origin.url("/m"), tmp_path / "m", sha256=None, policy=LOOPBACK_OK, on_bytes=cancel_midway
        )
    assert scope.cancelled_caught
    assert await _listing(tmp_path) == []


async def test_proxy_environment_is_ignored(
    origin: Server, canary: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, canary.url())
    origin.routes["/m"] = _body(b"direct")
    with trio.fail_after(DEADLINE):
        await download(origin.url("/m"), tmp_path / "m", sha256=None, policy=LOOPBACK_OK)
    assert (origin.hits, canary.hits) == (1, 0)


@pytest.mark.parametrize(("cert_ip", "ok"), [("127.0.0.1", True), ("127.0.0.9", False)])
async def test_https_verifies_the_certificate_for_the_host(
    cert_ip: str, ok: bool, nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    ca_file, server_ctx = self_signed(certs, cert_ip)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    server = Server("127.0.0.1", routes={"/m": _body(b"secret model")}, tls=server_ctx)
    await server.start(nursery)
    out = tmp_path / "out"
    out.mkdir()
    policy = UrlPolicy(allow_networks=("127.0.0.0/8",))
    with trio.fail_after(DEADLINE):
        if ok:
            got = await download(server.url("/m", "https"), out / "m", sha256=None, policy=policy)
            assert got[1] == len(b"secret model")
            assert await trio.Path(out / "m").read_bytes() == b"secret model"
        else:
            with pytest.raises(FetchError) as info:
                await download(server.url("/m", "https"), out / "m", sha256=None, policy=policy)
            assert info.value.reason is FailureReason.FETCH
            assert "TLS" in info.value.detail
            assert await _listing(out) == []


ADDRESS_TABLE = [
    ("8.8.8.8", True),
    ("2606:4700::1111", True),
    ("127.0.0.1", False),
    ("127.255.255.254", False),
    ("::1", False),
    ("10.1.2.3", False),
    ("172.31.255.255", False),
    ("192.168.0.1", False),
    ("100.127.0.1", False),
    ("169.254.169.254", False),
    ("fd00:ec2::254", False),
    ("ff02::1", False),
    ("ff0e::1", False),
    ("::ffff:8.8.8.8", False),
    ("2002:808:808::", False),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),
    ("0.0.0.0", False),
    ("198.18.0.1", False),
    ("192.0.2.1", False),
    ("not-an-ip", False),
]


@pytest.mark.parametrize(("ip", "ok"), ADDRESS_TABLE)
def test_check_address(ip: str, ok: bool) -> None:
    if ok:
        UrlPolicy().check_address(ip)
    else:
        with pytest.raises(FetchError) as info:
            UrlPolicy().check_address(ip)
        assert info.value.reason is FailureReason.URL_REFUSED


def test_allowed_networks_admit_exactly_their_range() -> None:
    policy = UrlPolicy(allow_networks=("127.0.0.0/8", "fd00::/8"))
    policy.check_address("127.0.0.2")
    policy.check_address("fd00::5")
    for ip in ("10.0.0.1", "::1", "::ffff:127.0.0.1"):
        with pytest.raises(FetchError):
            policy.check_address(ip)


_PRIVATE_V4 = st.one_of(
    st.integers(0x7F000000, 0x7FFFFFFF),
    st.integers(0x0A000000, 0x0AFFFFFF),
    st.integers(0xC0A80000, 0xC0A8FFFF),
    st.integers(0xA9FE0000, 0xA9FEFFFF),
)


def _spellings(n: int) -> list[str]:
    octets = n.to_bytes(4, "big")
    return [
        str(n),
        hex(n),
        ".".join(str(o) for o in octets),
        ".".join(f"0{o:o}" for o in octets),
        ".".join(hex(o) for o in octets),
        f"{octets[0]}.{int.from_bytes(octets[1:], 'big')}",
        f"[::ffff:{ipaddress.IPv4Address(n)}]",
    ]


@settings(max_examples=200, deadline=None)
@given(_PRIVATE_V4)
def test_every_spelling_of_a_private_ipv4_is_refused(n: int) -> None:
    policy = UrlPolicy(allow_http=True)
    for host in _spellings(n):
        with pytest.raises(FetchError) as info:
            policy.check_url(f"http://{host}/model.onnx")
        assert info.value.reason is FailureReason.URL_REFUSED
