"""One attempt of a completion request: what it saw, and its streamed body read into it as it arrives.

Each read of the body is stamped where its bytes arrived (`drivers.endpoint.http1`) and decoded at once
(`drivers.endpoint.sse`, linear in the bytes), so what the attempt keeps between reads is only the line in
progress, the event's data lines, its text and one time per delta, never the body. After every read
the attempt sets its hold on the run's budget (`drivers.endpoint.budget`) to what it keeps; a read that would
take the run past it ends the attempt (`TooLarge`), as does an answer past what its request's
`max_tokens` can carry (`MAX_TOKEN_CHARS`). Every read is an await on the socket, a trio
checkpoint, and so is every `STEP_NS` of work between them (h11 hands out a read's tiny chunks one
event each, with no read between): the run's deadline (the attempt's cancel scope) is checked there,
and the event loop waits at most that long, plus the decoding of one read, for any one request.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Final

import h11
import trio

from drivers.endpoint.budget import Hold
from drivers.endpoint.http1 import Connection, next_event
from drivers.endpoint.sse import SseDecoder, SseEvent, Usage, read_chunk

MAX_BODY_BYTES: Final = 64 << 20  # one response's bytes read, kept or not
MAX_TEXT_CHARS: Final = 200_000  # answer text kept (as much reasoning text): the rest is counted, not kept
MAX_PARSE_SAMPLES: Final = 256  # parse times of single reads kept per attempt (their total is kept whole)
DRAIN_S: Final = 0.5  # after [DONE], how long the body may take to end before the connection is dropped
MAX_TOKEN_CHARS: Final = 256
"""Characters one output token may carry, for an answer's bound: a 2025 vocabulary's longest tokens
are runs of spaces, `#` or `=` (SmolLM2's longest, 81). An answer past its request's `max_tokens` x
this is no answer to that request, whatever the machine's speed: the attempt ends there,
`response_too_large` (reasoning is not held to it: some APIs count it apart from `max_tokens`; the
run's budget bounds it)."""
_PER_TIME: Final = 1  # each delta's time is one piece


class TooLarge(Exception):
    """A response past `MAX_BODY_BYTES`, an answer past its request's `max_tokens` (`MAX_TOKEN_CHARS`),
    or one that would take the run past its budget."""


@dataclass
class Attempt:
    """What one attempt saw so far; a deadline turns it into a record as it stands.

    `written` says whether its request reached the server's socket (retries count as requests the
    server received, a connection refused does not).
    """

    max_tokens: int | None = None  # the request's; None: its answer is bound by the budgets alone
    sent_ns: int = field(default_factory=time.perf_counter_ns)
    written: bool = False
    answer_chars: int = 0  # every answer character streamed, kept or not
    times_ms: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    text_chars: int = 0
    answer_ms: float | None = None  # the first answer (not reasoning) text
    reasoning: list[str] = field(default_factory=list)
    reasoning_chars: int = 0
    thinking: int = 0  # deltas that carried reasoning text
    usage: Usage | None = None
    done: bool = False
    finished: bool = False  # a finish_reason came: a body that then ends without [DONE] is complete
    parse_ns: list[int] = field(default_factory=list)  # the first `MAX_PARSE_SAMPLES` reads
    parse_total_ns: int = 0

    def since_sent_ms(self, now_ns: int) -> float:
        return (now_ns - self.sent_ns) / 1e6

    def parsed(self, ns: int) -> None:
        self.parse_total_ns += ns
        if len(self.parse_ns) < MAX_PARSE_SAMPLES:
            self.parse_ns.append(ns)

    @property
    def kept_bytes(self) -> int:
        return self.text_chars + self.reasoning_chars

    @property
    def kept_pieces(self) -> int:
        return len(self.text) + len(self.reasoning) + _PER_TIME * len(self.times_ms)


async def read_body(conn: Connection, attempt: Attempt, hold: Hold) -> None:
    """Read and decode the body until it ends, each delta timed at its read's arrival. After
    `[DONE]` the body has `DRAIN_S` to end, or the connection is dropped (the attempt is complete).

    Reads are taken as fast as they come and queued while more bytes wait in the socket (parsing
    between them would let the next bytes pile up behind and be stamped with the last ones); the
    queue is decoded when the socket has nothing more, or holds `PARSE_AT` (bytes, pieces).

    Raises:
        StreamFault: the bytes are not an OpenAI-compatible stream, or the server reported an error.
        TooLarge: the body passed `MAX_BODY_BYTES`, or the run's budget (the detail says which).
    """
    body = _Body(SseDecoder(), attempt, hold)
    with trio.CancelScope() as drain:
        while True:
            event, arrived = await next_event(conn, attempt.sent_ns)
            if not isinstance(event, h11.Data):
                await body.parse()
                return
            body.queue(arrived, bytes(event.data))
            if body.queued_bytes >= PARSE_AT[0] or len(body.pieces) >= PARSE_AT[1] or not conn.raw.waiting():
                await body.parse()
            if attempt.done and drain.deadline == math.inf:
                drain.deadline = trio.current_time() + DRAIN_S
            await body.step()


PARSE_AT: Final = (8 << 20, 4096)  # a queue this large (bytes, pieces) is decoded before more is read
STEP_NS: Final = 2_000_000  # the longest this request holds the event loop between two checkpoints


@dataclass
class _Body:
    """The reads of one body queued (arrival, bytes) and decoded into the attempt, under its hold."""

    decoder: SseDecoder
    attempt: Attempt
    hold: Hold
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    queued_bytes: int = 0
    received: int = 0
    stepped_ns: int = field(default_factory=time.perf_counter_ns)  # its last checkpoint

    async def step(self) -> None:
        """A checkpoint once this request held the loop `STEP_NS` (h11 may hold a read's thousand
        tiny chunks, each an event handed out with no read, hence no checkpoint, between them)."""
        if time.perf_counter_ns() - self.stepped_ns >= STEP_NS:
            await trio.lowlevel.checkpoint()
            self.stepped_ns = time.perf_counter_ns()

    def queue(self, arrived: int, data: bytes) -> None:
        self.received += len(data)
        if self.received > MAX_BODY_BYTES:
            raise TooLarge(f"the response passed {MAX_BODY_BYTES} bytes")
        self.pieces.append((arrived, data))
        self.queued_bytes += len(data)
        self.keep()

    def keep(self) -> None:
        decoder, attempt = self.decoder, self.attempt
        kept = decoder.kept_bytes + attempt.kept_bytes + self.queued_bytes
        pieces = decoder.kept_pieces + attempt.kept_pieces + len(self.pieces)
        over = self.hold.keep(kept, pieces)
        if over is not None:
            raise TooLarge(over)

    async def parse(self) -> None:
        """Decode the queue in order, with a checkpoint every `STEP_NS` (one read at most between)."""
        pieces, self.pieces, self.queued_bytes = self.pieces, [], 0
        for arrived, data in pieces:
            started = time.perf_counter_ns()
            try:
                take(self.decoder.feed(data), self.attempt, arrived)
            finally:
                self.attempt.parsed(time.perf_counter_ns() - started)
            await self.step()
        self.keep()


def take(events: list[SseEvent], attempt: Attempt, arrived_ns: int) -> None:
    """Fold one read's events into the attempt: every answer or reasoning delta is timed at the read's
    arrival; text past `MAX_TEXT_CHARS` is counted by its delta's time, not kept.

    Raises:
        TooLarge: the answer passed what its request's `max_tokens` can carry (`MAX_TOKEN_CHARS`).
    """
    for event in events:
        chunk = read_chunk(event)
        if chunk.text or chunk.reasoning:
            attempt.times_ms.append(attempt.since_sent_ms(arrived_ns))
            attempt.thinking += 1 if chunk.reasoning else 0
            if chunk.reasoning and attempt.reasoning_chars < MAX_TEXT_CHARS:
                attempt.reasoning.append(chunk.reasoning)
                attempt.reasoning_chars += len(chunk.reasoning)
        if chunk.text:
            attempt.answer_chars += len(chunk.text)
            cap = None if attempt.max_tokens is None else attempt.max_tokens * MAX_TOKEN_CHARS
            if cap is not None and attempt.answer_chars > cap:
                raise TooLarge(
                    f"its answer passed {cap} characters, more than the request's max_tokens "
                    f"({attempt.max_tokens}) can carry"
                )
            if attempt.text_chars < MAX_TEXT_CHARS:
                attempt.text.append(chunk.text)
                attempt.text_chars += len(chunk.text)
            if attempt.answer_ms is None:
                attempt.answer_ms = attempt.times_ms[-1]
        attempt.usage = chunk.usage or attempt.usage
        attempt.done = attempt.done or chunk.done
        attempt.finished = attempt.finished or chunk.finished


__all__ = ["MAX_TEXT_CHARS", "MAX_TOKEN_CHARS", "Attempt", "TooLarge", "read_body", "take"]
