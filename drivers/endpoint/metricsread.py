"""A model server's Prometheus metrics page, read by the submitter itself, within limits.

The submitter reads the page a campaign's endpoint names (`metrics_url`) before it deals a load and
when each result arrives, from its own socket: the worker sees neither read. The page is untrusted
bytes: at most `MAX_METRICS_BYTES` are read, within `METRICS_TIMEOUT_S`, no redirect followed, and
any failure is a value with its reason (`MetricsPage.error`), never an exception; the counters are
parsed where it is pure (`scheduler.verification.servercount.parse_counters`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Final

import httpx
import trio

METRICS_TIMEOUT_S: Final = 3.0
MAX_METRICS_BYTES: Final = 2 * 1024 * 1024
"""The same limit the parser holds a page to (`servercount.MAX_METRICS_BYTES`); one byte past it is read
so the parser can say the page was too long."""


@dataclass(frozen=True)
class MetricsPage:
    """A metrics page's bytes (at most one past `MAX_METRICS_BYTES`), or why none came."""

    body: bytes = b""
    error: str = ""


async def read_metrics(url: str, *, timeout_s: float = METRICS_TIMEOUT_S) -> MetricsPage:
    """GET `url` (a Prometheus text page) within `timeout_s`; never raises for a network or server failure."""
    body = b""
    client = httpx.AsyncClient(
        timeout=None, trust_env=False, follow_redirects=False, verify=ssl.create_default_context()
    )
    try:
        with trio.fail_after(timeout_s):
            async with client, client.stream("GET", url) as response:
                with trio.CancelScope() as reading:  # a cancel: a break abandons the generator
                    async for raw in response.aiter_bytes():
                        body += raw
                        if len(body) > MAX_METRICS_BYTES:
                            body = body[: MAX_METRICS_BYTES + 1]
                            reading.cancel()
    except trio.TooSlowError:
        return MetricsPage(error=f"GET {url}: no whole answer within {timeout_s:g} s")
    except (httpx.HTTPError, OSError, ValueError) as exc:
        return MetricsPage(error=f"GET {url}: {type(exc).__name__}: {exc}"[:300])
    if response.status_code != 200:
        head = body[:120].decode("utf-8", "replace")
        return MetricsPage(error=f"GET {url}: HTTP {response.status_code} {head!r}"[:300])
    return MetricsPage(body)


__all__ = ["MAX_METRICS_BYTES", "METRICS_TIMEOUT_S", "MetricsPage", "read_metrics"]
