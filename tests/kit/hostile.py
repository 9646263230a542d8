"""Hostile model servers on 127.0.0.1, in a process of their own, for the endpoint client's lab.

Run as `python tests/kit/hostile.py`: it listens on a free port, prints `ready <url>` and serves
until its stdin closes. Each request's path starts with the fault to commit (`<url>/<fault>/v1`
is the server URL a test gives the client); `GET /seen` answers how many requests each fault was
sent, as JSON (the server's own count of the load: a submitter's floor probe, its body's `user`
`PROBE_USER`, is answered as the fault says and not counted). The faults, on real sockets, raw bytes:

- `endless`: a valid stream of content deltas that never ends, as fast as the socket takes it;
- `hugeline`: a `data:` line of `HUGE_LINE` bytes with no end, in 64-byte HTTP chunks;
- `deepjson`: an event whose JSON nests 200,000 arrays deep (past the parser's recursion limit);
- `bigheader`: a header of 1 MiB; `endlessheaders`: header lines that never end;
- `badchunk`: a chunked body whose chunk size is not hex;
- `slowloris`: the status line, one byte every 0.2 s, forever;
- `gzipbomb`: an event stream sent `content-encoding: gzip`, 1 KiB that inflates to 64 MiB;
- `redirect`: a 302 to another port;
- `http500`: HTTP 500 every time;
- `http429`: HTTP 429 with an odd `Retry-After` (negative, garbage, or a century).

The child is its own process so that its threads never share the client's interpreter: what the
test measures (the client's loop and its memory) is the client's alone.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import socket
import socketserver
import sys
import threading
import time
from collections import Counter
from typing import Final

HUGE_LINE: Final = 2 << 20
ODD_RETRY_AFTER: Final = ("-5", "soon", "3153600000", "1e400", "NaN")
_DELTA: Final = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
_SSE_HEAD: Final = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


@functools.cache
def _bomb() -> bytes:
    """1 KiB-ish of gzip that inflates to 64 MiB (made once, before the server says it is ready)."""
    return gzip.compress(b"\0" * (64 << 20), compresslevel=9)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _answer(sock: socket.socket, fault: str, seen: int) -> None:
    if fault == "endless":
        sock.sendall(_SSE_HEAD)
        block = _chunk(_DELTA * 64)
        while True:
            sock.sendall(block)
    elif fault == "hugeline":
        sock.sendall(_SSE_HEAD + _chunk(b"data: "))
        for _ in range(HUGE_LINE // 64):
            sock.sendall(_chunk(b"x" * 64))
    elif fault == "deepjson":
        sock.sendall(_SSE_HEAD + _chunk(b"data: " + b"[" * 200_000 + b"\n\n") + b"0\r\n\r\n")
    elif fault == "bigheader":
        sock.sendall(b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    elif fault == "endlessheaders":
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        for i in itertools.count():
            sock.sendall(b"x-%d: y\r\n" % i)
    elif fault == "badchunk":
        sock.sendall(_SSE_HEAD + b"zz\r\n" + _DELTA + b"\r\n")
    elif fault == "slowloris":
        for byte in itertools.cycle(b"HTTP/1.1 200 OK\r\nx-slow: "):
            sock.sendall(bytes([byte]))
            time.sleep(0.2)
    elif fault == "gzipbomb":
        bomb = _bomb()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        sock.sendall(head + b"content-length: %d\r\n\r\n" % len(bomb) + bomb)
    elif fault == "redirect":
        sock.sendall(b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:9/v1\r\ncontent-length: 0\r\n\r\n")
    elif fault == "http500":
        body = b'{"error": "model failed to load"}'
        sock.sendall(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
    elif fault == "http429":
        after = ODD_RETRY_AFTER[seen % len(ODD_RETRY_AFTER)].encode()
        sock.sendall(
            b"HTTP/1.1 429 Too Many Requests\r\nretry-after: %s\r\ncontent-length: 4\r\n\r\nbusy" % after
        )


PROBE_USER = "sark-floor-probe"  # drivers.endpoint.floorprobe.PROBE_USER (this file runs alone, -P)


def _request(stream: socket.SocketIO) -> tuple[str, str, bytes] | None:
    """(method, path, body) of the next request; None when the client closed."""
    lines = []
    while (line := stream.readline(65536)) not in (b"\r\n", b"\n", b""):
        lines.append(line)
    if not lines:
        return None
    method, path, _ = lines[0].decode("latin-1").split(" ", 2)
    length = next((int(v) for k, _, v in (h.decode("latin-1").partition(":") for h in lines[1:])
                   if k.strip().lower() == "content-length"), 0)  # fmt: skip
    return method, path, stream.read(length) or b""


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def serve() -> None:
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = socket.SocketIO(sock, "rb")
            try:
                while (asked := _request(stream)) is not None:
                    _, path, body = asked
                    if path == "/seen":
                        with lock:
                            body = json.dumps(dict(seen)).encode()
                        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                        continue
                    fault = path.strip("/").split("/", 1)[0]
                    with lock:
                        before = seen[fault]
                        seen[fault] += PROBE_USER.encode() not in body  # a submitter's floor probe: not load
                    _answer(sock, fault, before)
            except OSError:
                return

    _bomb()
    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"ready http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    serve()
