"""A scripted OpenAI-compatible streaming server on 127.0.0.1, for endpoint tests and benchmarks.

A script maps each request (its JSON body and how many times this prompt was asked before) to a
`Reply`: a status, headers and pieces of body, each written and flushed after its own delay, in
HTTP/1.1 chunked encoding; a reply's `cue`, when given, orders its writes against the test's client
(called before each piece and once the body has ended, it may wait or signal). Faults are replies
too: an error status with `Retry-After`, a body that is not SSE, bytes split mid-line or
mid-character, a stream that never ends. The server runs in threads (one per connection), so
synchronous and trio callers can both use it; every request is recorded (path, headers, body) for
the test to inspect: a submitter's own probe of the server (a fleet's floor,
`drivers.endpoint.floorprobe`, its body's `user` set to `PROBE_USER`) in `probes`, the load's
requests in `seen`.
"""

from __future__ import annotations

import fcntl
import json
import socket
import ssl
import struct
import termios
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from drivers.endpoint.floorprobe import PROBE_USER

SSE_HEADERS = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))


@dataclass(frozen=True)
class Reply:
    """One scripted answer: status, headers, then (delay_s, bytes) pieces; `hang` keeps it open.

    `cue(i)` is called (by `serve_sse`, in the answering thread) after piece i's delay and before it
    is written, and `cue(len(pieces))` once the client's kernel has acknowledged the body's last byte
    (`_acknowledged`): a test orders the server's writes against its client by it (waiting on an
    event there, or setting one), where a delay only hopes.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = SSE_HEADERS
    pieces: tuple[tuple[float, bytes], ...] = ()
    hang: bool = False
    cue: Callable[[int], None] | None = None


Script = Callable[[dict[str, object], int], Reply]


@dataclass
class Seen:
    """A request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, object]
    raw: bytes = b""  # the body's bytes as sent


def chunk_event(text: str, *, chat: bool = True) -> bytes:
    """One `data:` event carrying a content delta, shaped as a chat or a text completion chunk."""
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    return b"data: " + json.dumps({"object": "chunk", "choices": [choice]}).encode() + b"\n\n"


def reasoning_event(text: str) -> bytes:
    """One chat chunk carrying a reasoning model's thinking (`reasoning_content`), no answer text."""
    choice = {"index": 0, "delta": {"reasoning_content": text}}
    return b"data: " + json.dumps({"object": "chunk", "choices": [choice]}).encode() + b"\n\n"


def usage_event(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None) -> bytes:
    """The trailing usage chunk (empty choices), as `stream_options.include_usage` asks for; with
    `completion_tokens_details.reasoning_tokens` when `reasoning_tokens` is given."""
    usage: dict[str, object] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


DONE_EVENT = b"data: [DONE]\n\n"


def scheduled(
    texts: list[str],
    *,
    first_s: float = 0.0,
    every_s: float = 0.0,
    usage: tuple[int, int] | tuple[int, int, int] | None = None,
    thinking: list[str] | None = None,
) -> Reply:
    """A well-formed stream: first delta after `first_s`, then one every `every_s`, usage, [DONE];
    the `thinking` deltas (reasoning_content) come first when given, on the same clock."""
    events = [reasoning_event(t) for t in thinking or []] + [chunk_event(t) for t in texts]
    pieces = [(first_s if i == 0 else every_s, event) for i, event in enumerate(events)]
    tail = (usage_event(*usage) if usage else b"") + DONE_EVENT
    return Reply(pieces=(*pieces, (0.0, tail)))


def prompt_of(body: dict[str, object]) -> str:
    """The prompt text of a chat or a text completion body."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        return str(messages[0].get("content", ""))
    return str(body.get("prompt", ""))


@dataclass
class SseServer:
    """A running scripted server: its URL, the requests it saw, and the stop switch."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    probes: list[Seen] = field(default_factory=list)  # the submitter's floor probes (`PROBE_USER`)
    stop: threading.Event = field(default_factory=threading.Event)
    nodelay: list[bool] = field(default_factory=list)
    """Per request answered, whether its connection sends a write at once (TCP_NODELAY, read from
    the kernel): what keeps a token from waiting for the client's delayed ACK of the last one."""


class _Server(ThreadingHTTPServer):
    """A listen backlog as a real server's (uvicorn: 2048): socketserver's 5 drops the SYNs of a
    level's connections opened at once while a busy machine is slow to accept, and the client
    retries each a second later (a capacity level of 8 then held 4 at the server)."""

    request_queue_size = 1024


def _acknowledged(sock: socket.socket, stop: threading.Event) -> None:
    """Wait until the peer's kernel has acknowledged every byte written to `sock` (Linux's `TIOCOUTQ`
    on a TCP socket: the bytes not yet sent or not yet acknowledged). Acknowledged, they are in the
    peer's socket, their arrival stamped, however loaded the machine: a write returns once the bytes
    are queued, and the kernel may send them later (a paced congestion control, BBR's). Where the
    count cannot be read, written is all that can be said. Polled: no event says it."""
    while _OUTQ is not None:
        try:
            left = struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0" * 4))[0]
        except OSError:
            return
        if left <= 0 or stop.wait(0.001):
            return


_OUTQ: int | None = getattr(termios, "TIOCOUTQ", None)


@contextmanager
def serve_sse(script: Script, tls: ssl.SSLContext | None = None) -> Iterator[SseServer]:
    """Serve `script` on 127.0.0.1 on a free port until the block ends (hanging replies are released);
    over TLS with the server context `tls` (an https URL) when given."""
    asked: Counter[str] = Counter()
    lock = threading.Lock()
    state = SseServer(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as real servers do: a token is sent when written, not after
        # the client's delayed ACK of the last one (40 ms on Linux: every first token would read late)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

        def do_GET(self) -> None:
            self._answer({})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length) if length else b"{}"
            self._answer(json.loads(raw), raw)

        def _answer(self, body: dict[str, object], raw: bytes = b"") -> None:
            with lock:
                headers = {k.lower(): v for k, v in self.headers.items()}
                kept = state.probes if body.get("user") == PROBE_USER else state.seen
                kept.append(Seen(self.path, headers, body, raw))
                key = f"{self.path} {prompt_of(body)}"
                attempt = asked[key]
                asked[key] += 1
            reply = script(body, attempt)
            state.nodelay.append(bool(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            try:
                for i, (delay, data) in enumerate(reply.pieces):
                    if delay and state.stop.wait(delay):
                        return
                    if reply.cue is not None:
                        reply.cue(i)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                if reply.hang:
                    state.stop.wait()
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                if reply.cue is not None:
                    _acknowledged(self.connection, state.stop)
                    reply.cue(len(reply.pieces))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    server = _Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:  # each accepted connection does its handshake in its own handler thread
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    state.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
