"""The ASGI app (Starlette) and its server (Hypercorn on trio): /api, /api/openapi.json, the dashboard.

Loopback by default. Any other bind address needs a token; with a token, every request must carry
``Authorization: Bearer <token>`` or it gets 401. Before that, `RequestGuard` refuses a foreign Host
(421) or a foreign Origin (403); origins allowed with ``--allow-origin`` also get CORS headers.
"""

from __future__ import annotations

import hmac
import ipaddress
from importlib import resources
from typing import TYPE_CHECKING, Final

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from node.errors import ConfigError
from node.http.errors import ApiError, UnsafeBind
from node.http.guard import RequestGuard, admission, normal_origin
from node.http.openapi import openapi_schema
from node.http.routes import Endpoints
from node.http.state import ApiState

if TYPE_CHECKING:
    from trio_typing import TaskStatus

DASHBOARD: Final = resources.files("node").joinpath("assets/dashboard.html")


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a host and a port (0: any free port).

    Raises:
        ConfigError: not HOST:PORT with a port in 0..65535.
    """
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError("--http", f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether a bind host is loopback only (127.0.0.0/8, ::1 or the name localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve outside loopback without a token.

    Raises:
        UnsafeBind: `host` is not loopback and no token was given.
    """
    if not is_loopback(host) and not token:
        raise UnsafeBind(host)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = JSONResponse(
                    {"error": "unauthorized", "detail": "send Authorization: Bearer <token>"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.to_json(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such route) and 405 (method): nothing in the body to point at."""
    assert isinstance(exc, HTTPException)
    return JSONResponse(
        ApiError(exc.status_code, exc.detail).to_json(), status_code=exc.status_code, headers=exc.headers
    )


def build_app(state: ApiState, token: str | None = None) -> ASGIApp:
    """The whole HTTP surface over one running `ApiState`: guard, then CORS, then token, then routes."""
    html = DASHBOARD.read_text()
    schema = openapi_schema()

    async def dashboard(request: Request) -> Response:
        return HTMLResponse(html)

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema)

    app = Starlette(
        routes=[
            Route("/", dashboard, methods=["GET"]),
            Route("/api/openapi.json", openapi, methods=["GET"]),
            Mount("/api", routes=Endpoints(state).routes()),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
    )
    inner: ASGIApp = app if token is None else BearerAuth(app, token)
    options = state.options
    if options.allow_origins:
        inner = CORSMiddleware(
            inner,
            allow_origins=[normal_origin(o) for o in options.allow_origins],
            allow_methods=["GET", "POST", "PUT"],
            allow_headers=["Authorization", "Content-Type"],
        )
    return RequestGuard(inner, admission(options.allowed_hosts, options.allow_origins))


async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on host:port until cancelled; reports the bound base URL (the real port) when ready."""
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = None

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(serve, app, config)
        task_status.started(binds[0])
