"""Server-sent events of an OpenAI-compatible stream, decoded incrementally, with no I/O.

`SseDecoder.feed(bytes)` takes whatever a read returned (a line or a UTF-8 character may straddle
two reads) and returns the complete events; `read_chunk` turns one event's data into a `Chunk`: a
content delta, the trailing usage, the end marker `[DONE]`, or an error object the server sent
mid-stream. A chat delta's `content` is answer text; its `reasoning_content` (or `reasoning`) is a
reasoning model's thinking, kept apart so that the answer's first token can be timed on its own.
Lines starting with `:` are comments (keep-alive pings) and are counted, not returned.
Anything that is not SSE of JSON is a `StreamFault` with the kind the request record will carry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final, Literal, final

MAX_LINE_BYTES: Final = 1 << 20  # one SSE line; a server that never sends a newline is not SSE
MAX_EVENT_BYTES: Final = 1 << 20  # one event's data lines together
DONE: Final = "[DONE]"
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")  # only these end a line (not U+2028 and kin)

FaultKind = Literal["not_sse", "stream_error"]


class StreamFault(Exception):
    """The stream broke the SSE or OpenAI streaming format, or reported an error itself.

    Attributes:
        kind: `not_sse` (the bytes are not SSE of JSON) or `stream_error` (the server said so).
        detail: what was wrong, for people; never branched on.
    """

    def __init__(self, kind: FaultKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind: FaultKind = kind
        self.detail = detail


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its type (`message` unless the server named one) and its data."""

    event: str
    data: str


@final
class SseDecoder:
    """Incremental SSE decoder (the WHATWG event-stream rules: LF, CRLF or CR ends a line).

    Linear in the bytes fed: each read is scanned once for line ends (CR and LF never occur inside a
    UTF-8 character, so lines are cut on bytes and each line is decoded once, whole), and the part
    of a line still pending is appended to one buffer, never copied per read. `kept_bytes` and
    `kept_pieces` say what it holds between reads, for the run's budget (`drivers.endpoint.budget`).
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._skip_lf = False
        self.comments = 0

    @property
    def kept_bytes(self) -> int:
        """The bytes of the line in progress and of the event's data lines so far."""
        return len(self._pending) + self._data_bytes

    @property
    def kept_pieces(self) -> int:
        """The data lines of the event in progress (each one a string kept until the event ends)."""
        return len(self._data)

    def feed(self, raw: bytes) -> list[SseEvent]:
        """Decode one read's bytes; return the events it completed.

        Raises:
            StreamFault: `not_sse` for a line that is not UTF-8, or one past `MAX_LINE_BYTES`.
        """
        start = 0
        if self._skip_lf and raw.startswith(b"\n"):
            start = 1  # the LF of a CRLF that straddled two reads
        self._skip_lf = False
        events: list[SseEvent] = []
        for end in _LINE_END.finditer(raw, start):
            if self._pending:
                self._pending += raw[start : end.start()]
                line, self._pending = bytes(self._pending), bytearray()
            else:
                line = raw[start : end.start()]
            start = end.end()
            event = self._line(_text(line))
            if event is not None:
                events.append(event)
        if start < len(raw):
            self._pending += raw[start:]
        elif raw:
            self._skip_lf = raw.endswith(b"\r")
        if len(self._pending) > MAX_LINE_BYTES:
            raise StreamFault("not_sse", f"a line longer than {MAX_LINE_BYTES} bytes")
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._data_bytes += len(line)
            if self._data_bytes > MAX_EVENT_BYTES:
                raise StreamFault("not_sse", f"an event's data longer than {MAX_EVENT_BYTES} bytes")
        elif name == "event":
            self._event = value
        elif name not in ("id", "retry"):  # stricter than WHATWG, which ignores unknown fields
            raise StreamFault("not_sse", f"not an SSE line: {line[:80]!r}")
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SseEvent(self._event or "message", "\n".join(self._data))
        self._data, self._data_bytes, self._event = [], 0, ""
        return event


def _text(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StreamFault("not_sse", f"body is not UTF-8 ({exc.reason})") from exc


@dataclass(frozen=True)
class Usage:
    """The token counts of the server's usage object (`completion_tokens_details.reasoning_tokens`:
    how many of the completion tokens were reasoning, 0 when the server does not say)."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class Chunk:
    """What one event meant: answer text and reasoning text (either possibly empty), usage, the end of
    the stream, or (`finished`) a choice's `finish_reason`: the answer is complete even if the server
    then closes the body without `[DONE]`, as `transformers serve` (5.x) does."""

    text: str = ""
    reasoning: str = ""
    usage: Usage | None = None
    done: bool = False
    finished: bool = False


def read_chunk(event: SseEvent) -> Chunk:
    """Interpret one event of an OpenAI-compatible completion stream (chat or text completion).

    Raises:
        StreamFault: `stream_error` for an error object; `not_sse` for data that is not such a chunk.
    """
    if event.data.strip() == DONE:
        return Chunk(done=True)
    try:
        body = json.loads(event.data)
    except (ValueError, RecursionError) as exc:  # a server can nest arrays past the parser's depth
        raise StreamFault("not_sse", f"event data is not JSON: {event.data[:80]!r}") from exc
    if not isinstance(body, dict):
        raise StreamFault("not_sse", f"event data is not a JSON object: {event.data[:80]!r}")
    if event.event == "error" or "error" in body or body.get("object") == "error":
        raise StreamFault("stream_error", f"server error mid-stream: {_error_text(body)}")
    choices = body.get("choices")
    text, reasoning = _delta_text(choices)
    return Chunk(text, reasoning, usage=_usage(body.get("usage")), finished=_finished(choices))


def _delta_text(choices: object) -> tuple[str, str]:
    """(answer text, reasoning text) of the first choice."""
    if not isinstance(choices, list) or not choices:
        return "", ""
    first = choices[0]
    if not isinstance(first, dict):
        raise StreamFault("not_sse", "a choice is not a JSON object")
    delta = first.get("delta")
    if isinstance(delta, dict):  # chat: content, or a reasoning model's thinking
        thoughts = (delta.get("reasoning_content"), delta.get("reasoning"))
        content = delta.get("content")
        answer = content if isinstance(content, str) else ""
        return answer, "".join(p for p in thoughts if isinstance(p, str))
    text = first.get("text")  # text completion
    return (text if isinstance(text, str) else ""), ""


def _finished(choices: object) -> bool:
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    return choices[0].get("finish_reason") is not None


def _usage(usage: object) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(completion, int) or isinstance(completion, bool) or completion < 0:
        return None
    prompt_ok = isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    reasoning_ok = isinstance(reasoning, int) and not isinstance(reasoning, bool) and reasoning >= 0
    return Usage(
        prompt if prompt_ok and isinstance(prompt, int) else 0,
        completion,
        min(reasoning, completion) if reasoning_ok and isinstance(reasoning, int) else 0,
    )


def _error_text(body: dict[str, object]) -> str:
    error = body.get("error", body)
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or error.get("code") or "no message"
        return str(message)[:300]
    return str(error)[:300]


__all__ = ["DONE", "Chunk", "SseDecoder", "SseEvent", "StreamFault", "Usage", "read_chunk"]
