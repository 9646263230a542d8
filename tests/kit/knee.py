"""A scripted model server with a known knee: its first token comes later the more requests it holds.

A `serve_sse` script. Each request's first token comes `fast_s` after it arrives while at most
`knee` requests (itself included) are in flight, and `step_s` later for each one beyond `knee`:
a server that keeps up to `knee` requests at once and queues the rest. In a closed loop, concurrency
`knee` meets a first-token SLO between `fast_s` and `fast_s + step_s` and `knee + 1` does not; in an
open loop above its capacity the queue, and with it the first-token time, keeps growing. The server
counts a request in flight until its scheduled last token, even if the client went away (as a real
server finishes what it started). A GET (no body) lists `model` as `GET /v1/models` does, so a
worker can declare it as its own server (gray-box).

The server remembers its busiest moment for `memory_s`: a request is served as if it arrived with the
most requests the server held at any arrival in the last `memory_s` (as a real server's queue and
cache pressure outlast one request). A closed loop of `c` requests never holds more than `c` at once,
so this never slows a level at or below the knee; above it, a loaded client's turnaround gaps (the
ms between one request's end and its slot's next send) no longer let most requests arrive to a
momentarily emptier server and pass as fast.

With `refuse`, the server holds at most `knee` requests and answers any more at once with 429 and a
`Retry-After` past any client's retry budget (text-generation-inference's `max_concurrent_requests`
answers 429 so): its knee is a count, not a time. A closed loop of `c` never holds more than `c`, so a
level at or below the knee sees no refusal however slowly a loaded machine lets it run, and a level
above it sees refusals at once; a search whose SLO no answered request comes near finds the knee
exactly, on any machine. A first token still comes `fast_s` after its request.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from kit.sse_server import Reply, scheduled, serve_sse

JSON = (("content-type", "application/json"),)
REFUSED = (*JSON, ("retry-after", "3600"))
"""An hour: past `RetryPolicy.max_wait_s`, so the client reports the 429 at once instead of waiting."""


@dataclass
class KneeStub:
    """The script: call it as `serve_sse`'s script. `peak` is the most requests it held at once,
    `refused` how many it answered with 429 (with `refuse`)."""

    knee: int
    model: str = "knee"
    fast_s: float = 0.02
    step_s: float = 0.25
    tokens: int = 4
    every_s: float = 0.005
    memory_s: float = 0.1
    refuse: bool = False
    peak: int = 0
    refused: int = 0
    _ends: list[float] = field(default_factory=list)
    _busy: list[tuple[float, int]] = field(default_factory=list)  # (arrival, held then), last memory_s
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def first_token_s(self, in_flight: int) -> float:
        """When the first token of a request that arrives with `in_flight` held (itself included) comes."""
        return self.fast_s + self.step_s * max(0, in_flight - self.knee)

    def __call__(self, body: dict[str, object], attempt: int) -> Reply:
        if not body:  # GET /v1/models
            listing = {"object": "list", "data": [{"id": self.model}]}
            return Reply(200, JSON, ((0.0, json.dumps(listing).encode()),))
        now = time.monotonic()
        with self._lock:
            self._ends = [end for end in self._ends if end > now]
            in_flight = len(self._ends) + 1
            if self.refuse and in_flight > self.knee:
                self.refused += 1
                return Reply(429, REFUSED, ((0.0, b'{"error":"Model is overloaded"}'),))
            self.peak = max(self.peak, in_flight)
            self._busy = [(at, held) for at, held in self._busy if at > now - self.memory_s]
            self._busy.append((now, in_flight))
            first = self.first_token_s(max(held for _, held in self._busy))
            self._ends.append(now + first + self.every_s * (self.tokens - 1))
        texts = ["tok"] * self.tokens
        return scheduled(texts, first_s=first, every_s=self.every_s, usage=(8, self.tokens))


def _serve_in_child(settings: dict[str, Any], urls: Connection, stop: Connection) -> None:
    """The child's life: serve a `KneeStub(**settings)` until the parent says stop (or goes away)."""
    with serve_sse(KneeStub(**settings)) as server:
        urls.send(server.url)
        with contextlib.suppress(EOFError):
            stop.recv()


@contextlib.contextmanager
def serving_apart(**settings: Any) -> Iterator[str]:
    """A `KneeStub(**settings)` served by a process of its own (its URL for the block): its first tokens
    come on its own interpreter's time, not after the client's, as a real server's do. Served in a
    thread of a test's process, every token waited for the client's work to let go of the GIL, and on
    a loaded machine a first token due 20 ms after its request came after the 150 ms SLO (the fast
    tier beside `kit.load 4`: a search's level 2 of a knee at 3 failed)."""
    context = multiprocessing.get_context("spawn")
    url_end, url_here = context.Pipe(duplex=False)
    stop_here, stop_end = context.Pipe(duplex=False)
    child = context.Process(target=_serve_in_child, args=(settings, url_here, stop_here), daemon=True)
    child.start()
    try:
        if not url_end.poll(60):
            raise AssertionError("the knee stub's process did not start within 60 s")
        yield url_end.recv()
    finally:
        stop_end.close()  # its recv() sees the end
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(10)
