"""Who may talk to the API: the Host it serves under, and the web pages (Origins) allowed to call it.

A browser lets any page send requests to ``127.0.0.1``; two checks keep such pages out, as Jupyter
and Ollama do:

- DNS rebinding: a page on ``evil.example`` whose name later resolves to 127.0.0.1 reads the API as
  same-origin, but its requests carry ``Host: evil.example:PORT``. Only the address the server
  answers on (and, on loopback, ``localhost``, ``127.0.0.1`` and ``[::1]``) or a name the owner
  allowed (``--allowed-host``) is served; anything else gets 421 Misdirected Request.
- Cross-site requests: a page elsewhere posts a form or a ``text/plain`` fetch, which needs no CORS
  preflight; the browser then adds ``Origin``. A request whose Origin is neither the server's own nor
  one the owner allowed (``--allow-origin``) gets 403, GET included. Requests without Origin (curl,
  scripts, same-origin GETs) pass.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Final, final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from node.errors import ConfigError
from node.http.errors import Problem, Refused, Rule

_NAME_RE: Final = re.compile(r"[a-z0-9_]([a-z0-9_.-]{0,252})")
LOOPBACK_NAMES: Final = frozenset({"localhost"})
MISDIRECTED: Final = 421
FORBIDDEN: Final = 403


def split_host(text: str) -> tuple[str, int | None] | None:
    """A Host header (``name``, ``name:port``, ``[v6]:port``) as a lowercase name and a port.

    Returns:
        (name, port or None), or None if the text is not a host.
    """
    text = text.strip().lower()
    if text.count(":") > 1 and not text.startswith("["):
        return None
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
        if _ip(name) is None:
            return None
    else:
        name, _, port_text = text.partition(":")
        if not _NAME_RE.fullmatch(name):
            return None
    name = name.rstrip(".")
    if not name or (port_text and (not port_text.isdigit() or int(port_text) > 65535)):
        return None
    return name, int(port_text) if port_text else None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@final
@dataclass(frozen=True)
class Admission:
    """The Host and Origin rules of one server.

    Attributes:
        allowed_hosts: extra names (``name`` for any port, or ``name:port``) from ``--allowed-host``.
        allow_origins: origins (``scheme://host[:port]``) from ``--allow-origin``.
    """

    allowed_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    _origins: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_origins", frozenset(normal_origin(o) for o in self.allow_origins))

    def host_ok(self, host: str, server: tuple[str, int] | None) -> bool:
        """Whether a Host header names this server: `server` is the (address, port) the request came to."""
        parsed = split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        for allowed in self.allowed_hosts:
            wanted = split_host(allowed)
            if wanted is not None and wanted[0] == name and wanted[1] in (None, port or 80):
                return True
        if server is None or (port or 80) != server[1]:
            return False
        served = _ip(server[0])
        given = _ip(name)
        if served is not None and served.is_loopback:
            return name in LOOPBACK_NAMES or (given is not None and given.is_loopback)
        return given is not None and given == served

    def origin_ok(self, origin: str, server: tuple[str, int] | None) -> bool:
        """Whether a request from a page of `origin` may reach the API (its own pages, or allowed ones)."""
        if normal_origin(origin) in self._origins:
            return True
        parts = urlsplit(origin.strip())
        return parts.scheme in ("http", "https") and self.host_ok(parts.netloc, server)

    def check(self, headers: dict[str, str], server: tuple[str, int] | None) -> Refused | None:
        """The refusal for a request with these (lowercase-named) headers, or None to let it in."""
        host = headers.get("host", "")
        if not self.host_ok(host, server):
            problem = Problem(
                "header:Host",
                Rule.HOST_NOT_ALLOWED,
                f"this server does not answer to Host {host!r}",
                "use the address it serves on, or start serve with --allowed-host NAME",
            )
            return Refused(MISDIRECTED, problem)
        origin = headers.get("origin")
        if origin is not None and not self.origin_ok(origin, server):
            problem = Problem(
                "header:Origin",
                Rule.ORIGIN_NOT_ALLOWED,
                f"requests from pages of {origin!r} are refused",
                "start serve with --allow-origin URL to let that page in",
            )
            return Refused(FORBIDDEN, problem)
        return None


def admission(allowed_hosts: tuple[str, ...], allow_origins: tuple[str, ...]) -> Admission:
    """The rules from ``--allowed-host`` and ``--allow-origin`` values, checked.

    Raises:
        ConfigError: a host that is not NAME or NAME:PORT, or an origin that is not scheme://host[:port].
    """
    for host in allowed_hosts:
        if split_host(host) is None:
            raise ConfigError("--allowed-host", f"expected NAME or NAME:PORT, got {host!r}")
    for origin in allow_origins:
        try:
            parts = urlsplit(origin.strip())
            parts.port  # noqa: B018 (raises ValueError on a bad port)
        except ValueError:
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ConfigError("--allow-origin", f"expected scheme://host[:port], got {origin!r}")
    return Admission(allowed_hosts, allow_origins)


def normal_origin(origin: str) -> str:
    """An origin as browsers send it: lowercase, no trailing slash."""
    return origin.strip().lower().rstrip("/")


@final
class RequestGuard:
    """ASGI middleware: refuse requests that fail the `Admission` rules before anything else runs."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self._app = app
        self._admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            server = scope.get("server")
            refusal = self._admission.check(headers, tuple(server) if server else None)
            if refusal is not None:
                await _answer(refusal, send)
                return
        await self._app(scope, receive, send)


async def _answer(refusal: Refused, send: Send) -> None:
    body = json.dumps(refusal.to_json()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": refusal.status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
