"""One streamed completion request to an OpenAI-compatible server, measured as a `RequestRecord`.

The request is greedy (temperature 0), streamed (`stream: true`) and asks for the trailing usage
chunk (`stream_options.include_usage`). Every read is timed on `time.perf_counter_ns` the moment it
arrives, before it is parsed; the parse time is kept apart as the client's own overhead. TTFT is
the first read that carried output text of any kind (answer or reasoning), TTFO the first that
carried answer text, E2E the last one (not the usage chunk). Output tokens come from the usage chunk
(`token_source` server-usage); without one they are counted one per delta and flagged
`tokens_counted` (`chunks`), until a pinned tokenizer counts them (`drivers.endpoint.tokencount`). A 429 or
5xx is retried after its `Retry-After` (or a doubling back-off), within a bounded number of retries
and a bounded total wait. Every failure is a record with an error kind; the API key goes only into
the Authorization header and is scrubbed from every detail.
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import dataclass, field, replace
from typing import Final
from urllib.parse import urlsplit

import h11
import trio

from drivers.endpoint.attempt import MAX_TEXT_CHARS, Attempt, TooLarge, read_body
from drivers.endpoint.budget import Budget, Hold
from drivers.endpoint.http1 import Connection, Origin, Pool, next_event, send_request
from drivers.endpoint.retrying import RETRIED, RetryPolicy, retry_after_s
from drivers.endpoint.sse import StreamFault
from protocol import ChatMessage, ErrorKind, GenerateSpec, Prompt, RequestRecord

MAX_DETAIL_CHARS: Final = 500
HEAD_S: Final = 2.0  # how long the body of an error answer may take to give the detail its first bytes


@dataclass(frozen=True)
class Server:
    """Where a request goes: the completions URL, the model id, the key, and a pinned address.

    Attributes:
        url: the full `.../v1/chat/completions` or `.../v1/completions` URL.
        model: the served model id.
        api_key: sent only as `Authorization: Bearer`; never in a record, a detail or a repr.
        connect_ip: connect to this checked address instead of resolving the URL's host again.
    """

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    connect_ip: str | None = None


@dataclass(frozen=True)
class Outcome:
    """A request's record, the parse time of each read, how many retries it took, and the reasoning
    text (not kept in the record; a pinned tokenizer counts it)."""

    record: RequestRecord
    parse_ns: tuple[int, ...]
    retries: int
    reasoning: str = ""
    sent_ns: int = 0  # perf clock: the first attempt's first byte written
    parse_total_ns: int = 0  # the parse time of every read (`parse_ns` keeps only the first ones)

    def with_record(self, record: RequestRecord) -> Outcome:
        return replace(self, record=record)


class _Closed(Exception):
    """The server closed a connection before it answered (a kept-alive one may be stale)."""


class _Failed(Exception):
    """An attempt ended without a complete stream: the record's error kind and detail."""

    def __init__(
        self, kind: ErrorKind, detail: str, status: int | None = None, retry_after: str | None = None
    ) -> None:
        super().__init__(detail)
        self.kind: ErrorKind = kind
        self.detail, self.status, self.retry_after = detail, status, retry_after


def request_body(model: str, prompt: Prompt, spec: GenerateSpec) -> dict[str, object]:
    """The JSON body: greedy, streamed, with usage; the prompt's chat turns when a dataset gave them, its
    own output length when it asks one; `ignore_eos` and `min_tokens` only when asked (not every
    server has them)."""
    body: dict[str, object] = {"model": model}
    if spec.chat:
        turns = prompt.messages or (ChatMessage(role="user", content=prompt.text),)
        body["messages"] = [{"role": m.role, "content": m.content} for m in turns]
    else:
        body["prompt"] = prompt.text
    max_tokens = prompt.output_tokens or spec.max_new_tokens
    body |= {
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if spec.ignore_eos:  # vLLM and SGLang take both; a server without them may refuse or ignore them
        body |= {"ignore_eos": True, "min_tokens": max_tokens}
    return body


def open_client() -> Pool:
    """The connections of one run (`drivers.endpoint.http1`): keep-alive per server, no proxies from the
    environment, no redirects, deadlines by cancel scope; https verified against the platform's trust
    store (as `drivers.endpoint.rtt`'s handshake and model downloads are: `SSL_CERT_FILE` and
    `SSL_CERT_DIR`)."""
    return Pool()


async def complete(
    client: Pool,
    server: Server,
    body: dict[str, object],
    *,
    deadline: float,
    retry: RetryPolicy,
    budget: Budget | None = None,
) -> Outcome:
    """Send one request (retrying 429 and 5xx within `retry`) and measure it until `deadline` (trio time).

    `budget` is the run's (`drivers.endpoint.budget`): what every request in flight keeps at once; None gives
    this request a budget of its own.

    Returns:
        The outcome; a failure is a record with `error` set, never an exception.
    """
    retries, waited, first_sent, written = 0, 0.0, 0, 0
    hold = (budget or Budget()).hold()
    asked = body.get("max_tokens")
    while True:
        attempt = Attempt(max_tokens=asked if isinstance(asked, int) else None)
        failure: _Failed | None = None
        with trio.move_on_at(deadline) as scope:
            try:
                await _stream(client, server, body, attempt, hold)
            except _Failed as exc:
                failure = exc
            finally:
                hold.release()
        if scope.cancelled_caught and not attempt.done:
            failure = _Failed("deadline", deadline_detail(attempt))
        elif failure is None and not (attempt.done or attempt.finished):
            failure = _Failed("stream_error", "the stream ended without [DONE] or a finish_reason")
        first_sent = first_sent or attempt.sent_ns
        written += attempt.written
        wait = _retry_wait(failure, retries, waited, retry, deadline - trio.current_time())
        if failure is not None and wait is not None:
            retries, waited = retries + 1, waited + wait
            await trio.sleep(wait)
            continue
        if failure is not None and failure.status in RETRIED and retries:
            failure.detail += f" (after {retries} retries, {waited:.1f} s waited)"
        record = _record(attempt, failure, server.api_key).with_(attempts=written)
        parse = (tuple(attempt.parse_ns), attempt.parse_total_ns)
        return Outcome(record, parse[0], retries, "".join(attempt.reasoning), first_sent, parse[1])


async def _stream(
    client: Pool, server: Server, body: dict[str, object], attempt: Attempt, hold: Hold
) -> None:
    """One attempt: take a connection, send, check status and type, then time and decode every read.
    A kept-alive connection the server closed meanwhile is replaced once by a fresh one."""
    origin, target, headers = _pinned(server)
    payload = json.dumps(body).encode()
    conn: Connection | None = None
    try:
        conn = await _connect(client, origin)
        try:
            event = await _send(conn, origin, target, headers, payload, attempt)
        except _STALE:
            if not conn.reused:
                raise
            await conn.aclose()
            conn = await _connect(client, origin, fresh=True)
            event = await _send(conn, origin, target, headers, payload, attempt)
        await _check_response(conn, event)
        await read_body(conn, attempt, hold)
    except StreamFault as exc:
        raise _Failed(exc.kind, exc.detail) from exc
    except TooLarge as exc:
        raise _Failed("response_too_large", f"server {_named(origin)}: {exc}") from exc
    except _Closed as exc:
        raise _Failed("stream_error", str(exc)) from exc
    except h11.ProtocolError as exc:
        raise _Failed("stream_error", f"not HTTP/1.1: {_cause(exc)}") from exc
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise _Failed("stream_error", f"the connection broke: {_cause(exc)}") from exc
    finally:
        if conn is not None:
            with trio.CancelScope(shield=True):
                await client.give(origin, conn)


def _named(origin: Origin) -> str:
    return f"{origin.host}:{origin.port}"


_STALE: Final = (OSError, trio.BrokenResourceError, h11.ProtocolError, _Closed)


async def _connect(client: Pool, origin: Origin, *, fresh: bool = False) -> Connection:
    try:
        return await client.take(origin, fresh=fresh)
    except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
        raise _Failed("connect", f"cannot connect: {_cause(exc)}") from exc


async def _send(
    conn: Connection,
    origin: Origin,
    target: str,
    headers: list[tuple[str, str]],
    payload: bytes,
    attempt: Attempt,
) -> h11.Response:
    """Write the request (the clock starts at its first byte) and read the response's head."""
    attempt.sent_ns = await send_request(conn, origin, target, headers, payload)
    attempt.written = True
    event, _ = await next_event(conn)
    if not isinstance(event, h11.Response):
        raise _Closed(f"the server answered {type(event).__name__} instead of a response")
    return event


async def _check_response(conn: Connection, response: h11.Response) -> None:
    content_type = _header(response, b"content-type")
    if response.status_code != 200:
        text = (await _head(conn)).decode("utf-8", "replace").strip()
        kind = _status_kind(response.status_code)
        detail = f"HTTP {response.status_code}: {text[:200]!r}"
        raise _Failed(kind, detail, response.status_code, _header(response, b"retry-after") or None)
    encoding = _header(response, b"content-encoding").strip().lower()
    if encoding not in ("", "identity"):  # never decoded: a compressed body could inflate without bound
        raise _Failed("not_sse", f"content-encoding {encoding[:40]!r}, which was not asked for (identity)")
    if not content_type.lower().startswith("text/event-stream"):
        text = (await _head(conn)).decode("utf-8", "replace").strip()
        raise _Failed("not_sse", f"content-type {content_type[:80]!r}, body starts {text[:120]!r}")


def _header(response: h11.Response, name: bytes) -> str:
    for key, value in response.headers:
        if key == name:
            return value.decode("latin-1")
    return ""


async def _head(conn: Connection, limit: int = 2048) -> bytes:
    """The first bytes of a body that is not the stream we asked for (for the error detail), as many
    as came within `HEAD_S`: an error answer whose body never ends does not hold the request (its
    connection is then dropped, not kept)."""
    head = b""
    with trio.move_on_after(HEAD_S):
        while len(head) < limit:
            event, _ = await next_event(conn)
            if not isinstance(event, h11.Data):
                break
            head += bytes(event.data)[: limit - len(head)]
    return head


def _status_kind(status: int) -> ErrorKind:
    if status == 429:
        return "rate_limited"
    return "server_error" if status >= 500 else "http_status"


def _retry_wait(
    failure: _Failed | None, retries: int, waited: float, policy: RetryPolicy, left_s: float
) -> float | None:
    """How long to wait before the next attempt, or None to report the failure now."""
    if failure is None or failure.status not in RETRIED or retries >= policy.max_retries:
        return None
    wait = retry_after_s(failure.retry_after)
    if wait is None:
        wait = policy.backoff_s * 2**retries
    if waited + wait > policy.max_wait_s or wait >= left_s:
        failure.detail += f" (Retry-After {wait:.1f} s is past the retry budget)"
        return None
    return wait


def _record(attempt: Attempt, failure: _Failed | None, api_key: str | None) -> RequestRecord:
    ended_ms = attempt.since_sent_ms(time.perf_counter_ns())
    times = attempt.times_ms
    usage = attempt.usage
    thinking = attempt.thinking
    return RequestRecord(
        prompt_id="",
        prompt_tokens=usage.prompt_tokens if usage else 0,
        output_tokens=usage.completion_tokens if usage else len(times),
        ttft_ms=times[0] if times else None,
        e2e_ms=times[-1] if times and failure is None else ended_ms,
        token_times_ms=tuple(times),
        output_text="".join(attempt.text)[:MAX_TEXT_CHARS],
        tokens_counted=usage is None,
        token_source="chunks" if usage is None else "server-usage",
        chunks=len(times),
        usage_tokens=usage.completion_tokens if usage else None,
        ttfo_ms=attempt.answer_ms,
        reasoning_tokens=usage.reasoning_tokens if usage and usage.reasoning_tokens else thinking,
        error=failure.kind if failure else None,
        error_detail=_scrub(failure.detail, api_key) if failure else "",
        http_status=failure.status if failure else None,
    )


def deadline_detail(attempt: Attempt) -> str:
    """Why the client's own deadline (the run's) ended an attempt, with how long the request waited
    and whether the server had begun its answer. A server that answers one request at a time holds
    the others in its queue: they wait, and the wait is the client's deadline passing, not the
    server failing (`drivers.endpoint.task` counts a run that only met deadlines so)."""
    if not attempt.written:
        return "the answer was not complete by the run's deadline: the request was not yet written"
    waited_s = attempt.since_sent_ms(time.perf_counter_ns()) / 1e3
    if not attempt.times_ms:
        return (
            f"the answer was not complete by the run's deadline: {waited_s:.1f} s after the request "
            "was written the server had sent no token (a server answering one request at a time "
            "queues the others)"
        )
    return (
        f"the answer was not complete by the run's deadline: {waited_s:.1f} s after the request "
        f"was written, {len(attempt.times_ms)} token(s) in"
    )


def _scrub(detail: str, api_key: str | None) -> str:
    """A detail safe to store: the key replaced wherever a server echoed it, and bounded."""
    if api_key:
        detail = detail.replace(api_key, "[api key]")
    return detail[:MAX_DETAIL_CHARS]


def _cause(exc: BaseException) -> str:
    """The exception and, where its own text is empty (httpx wraps TLS and socket errors so), its cause's."""
    inner: BaseException | None = exc
    while inner is not None and not str(inner):
        inner = inner.__cause__ or inner.__context__
    text = "" if inner is None else str(inner) if inner is exc else f"{type(inner).__name__}: {inner}"
    return f"{type(exc).__name__}: {text}"[:300]


def _pinned(server: Server) -> tuple[Origin, str, list[tuple[str, str]]]:
    """Where to connect (a pinned address keeps the URL's host for Host and SNI), the request target,
    and the headers besides Host and the body's."""
    headers = [("accept", "text/event-stream"), ("accept-encoding", "identity")]
    if server.api_key:
        headers.append(("authorization", f"Bearer {server.api_key}"))
    parts = urlsplit(server.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin.of(server.url, server.connect_ip), target, headers


__all__ = ["Outcome", "RetryPolicy", "Server", "complete", "open_client", "request_body"]
