"""A scripted streaming server inside the test's own trio run, for tests on trio's virtual clock.

`kit.sse_server` answers from threads, which a virtual clock cannot wait for: with trio's
`MockClock(autojump_threshold=0)` the clock jumps to the next deadline as soon as every task waits,
and a thread's answer is not a task. This server is trio tasks on 127.0.0.1 (h11 over trio's
sockets), so the client and the server run on one clock: a loopback byte is readable when its send
returns, the clock jumps only when both sides wait on timers, and each request is heard at the
virtual instant it was sent. The script is `kit.sse_server`'s (`Reply`, `scheduled`); each piece's
delay is a `trio.sleep`, virtual too.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import h11
import trio

from kit.sse_server import Script, prompt_of


@dataclass(frozen=True)
class Heard:
    """A request as the server read it: the trio instant its head came, and its JSON body."""

    at: float
    body: dict[str, object]


@dataclass
class ClockServer:
    """The server's URL (set once it listens) and every request heard, in order."""

    url: str = ""
    heard: list[Heard] = field(default_factory=list)

    def instants(self) -> list[float]:
        return [h.at for h in self.heard]


@asynccontextmanager
async def serve_on_clock(script: Script) -> AsyncIterator[ClockServer]:
    """Serve `script` on 127.0.0.1 from tasks of the caller's trio run until the block ends."""
    server = ClockServer()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, _handler(script, server), 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


def _handler(script: Script, server: ClockServer) -> Callable[[trio.SocketStream], Awaitable[None]]:
    asked: Counter[str] = Counter()

    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                head, body = await _request(stream, conn)
                if head is None:
                    return
                decoded = json.loads(body or b"{}")
                server.heard.append(Heard(trio.current_time(), decoded))
                prompt = prompt_of(decoded)
                reply = script(decoded, asked[prompt])
                asked[prompt] += 1
                headers = [*reply.headers, ("transfer-encoding", "chunked")]
                await stream.send_all(conn.send(h11.Response(status_code=reply.status, headers=headers)))
                for delay, piece in reply.pieces:
                    await trio.sleep(delay)
                    await stream.send_all(conn.send(h11.Data(data=piece)))
                if reply.hang:
                    await trio.sleep_forever()
                await stream.send_all(conn.send(h11.EndOfMessage()))
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()

    return handle


async def _request(stream: trio.SocketStream, conn: h11.Connection) -> tuple[h11.Request | None, bytes]:
    """The next request's head and whole body; (None, b"") when the client closed."""
    head: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return head, body
        else:  # ConnectionClosed, or anything a client should not send first
            return None, b""


__all__ = ["ClockServer", "Heard", "serve_on_clock"]
