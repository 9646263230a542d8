"""LLM load clients side by side: each one's TTFT and TPOT against what a scheduled server really did.

One OpenAI-compatible server (its own process, asyncio, TCP_NODELAY, keep-alive) answers every
streamed chat or text completion with its first token after `--first-ms`, then one every
`--every-ms`, `--tokens` in all, and logs for each request when it read the request and when it
wrote each token (CLOCK_MONOTONIC). The server's own TTFT is first write - request read; its TPOT
(last write - first write) / (tokens - 1). Each client runs `--requests` requests at each
concurrency of `--concurrency`; its error is |its median - the server's median over the same
requests| for TTFT and TPOT. Clients: sark-node's endpoint job (always), and GuideLLM and AIPerf
when `--peers` names them (`peer_tools.py`; inference-perf needs Python >= 3.12, see notes/llm_clients.md):
each is installed into its own venv under `--venvs` (pip from PyPI; never the project's venv), run
offline against a local tokenizer written there, and read back from its own output. A peer that
cannot be installed or run is reported as such.

Usage: .venv/bin/python benchmarks/llm_clients.py [--requests 40] [--concurrency 1,8,32]
       [--peers guidellm,aiperf] [--venvs /tmp/sark-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.endpoint.load import EndpointOptions, run_endpoint  # noqa: E402
from protocol import Endpoint, GenerateSpec, Prompt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_tools import PEERS, Measured, Shape, venv  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "llm_clients.json"

SERVER = r"""
import asyncio, json, socket, sys, time
first_s, every_s, tokens = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
log = open(sys.argv[4], "a", buffering=1)

def event(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"

def chunk(data):
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"

async def answer(writer, path, body):
    read_ns = time.monotonic_ns()
    chat = path.endswith("/chat/completions")
    kind = "chat.completion.chunk" if chat else "text_completion"
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    await writer.drain()
    writes, done = [], False
    asked = body.get("max_tokens") or body.get("max_completion_tokens")
    start = time.monotonic()
    try:
        for i in range(tokens):
            due = start + first_s + i * every_s
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
            writer.write(chunk(event({"id": "x", "object": kind, "model": body.get("model", "m"),
                                      "created": 0, "choices": [choice]})))
            writes.append(time.monotonic_ns())
            await writer.drain()
        usage = {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}
        last = {"id": "x", "object": kind, "model": body.get("model", "m"), "created": 0,
                "choices": [], "usage": usage}
        tail = event(last) + b"data: [DONE]\n\n"
        writer.write(chunk(tail) + b"0\r\n\r\n")
        await writer.drain()
        done = True
    finally:  # a request cut short (its client left) is logged too: it was read
        log.write(json.dumps({"read": read_ns, "writes": writes, "done": done, "asked": asked}) + "\n")

async def serve(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            raw = await reader.readexactly(length) if length else b""
            if method == "GET":
                models = [{"id": "sched", "object": "model"}]
                listing = json.dumps({"object": "list", "data": models}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(listing)).encode() + b"\r\n\r\n" + listing)
                await writer.drain()
                continue
            await answer(writer, path, json.loads(raw or b"{}"))
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


Client = Callable[[str, Shape, int, Path], Measured | str]


def server_entries(log: Path, since: int) -> list[dict[str, object]]:
    """What the server logged since line `since`: per request read, its read time, its token writes,
    whether it ended (`done`) and the output tokens it asked for (`asked`)."""
    return [json.loads(line) for line in log.read_text().splitlines()[since:]]


def log_lines(log: Path) -> int:
    return len(log.read_text().splitlines())


def _server_figures(log: Path, since: int) -> tuple[float, float, int]:
    """The server's median TTFT and TPOT (ms) over the requests it ended since line `since`."""
    entries: list[dict[str, object]] = [e for e in server_entries(log, since) if e["done"]]
    ttft = [(_writes(e)[0] - _read(e)) / 1e6 for e in entries]
    tpot = [(_writes(e)[-1] - _writes(e)[0]) / 1e6 / (len(_writes(e)) - 1) for e in entries]
    return statistics.median(ttft), statistics.median(tpot), len(entries)


def _writes(entry: dict[str, object]) -> list[int]:
    writes = entry["writes"]
    assert isinstance(writes, list)
    return writes


def _read(entry: dict[str, object]) -> int:
    read = entry["read"]
    assert isinstance(read, int)
    return read


def start_server(
    first_ms: float, every_ms: float, tokens: int, log: Path
) -> tuple[subprocess.Popen[str], str]:
    """The scheduled server in its own process, logging to `log`; its URL. End it with
    `.communicate("")`."""
    log.write_text("")
    schedule = (str(first_ms / 1e3), str(every_ms / 1e3), str(tokens), str(log))
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, *schedule], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}"


def _sark(url: str, shape: Shape, tokens: int, work: Path) -> Measured | str:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(shape.requests or 64))
    spec = GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=tokens,
        concurrency=shape.concurrency or 1,
        request_rate=shape.rate or None,
        duration_s=shape.duration_s or None,
        endpoint=Endpoint(model="sched"),
    )
    deadline = 600.0 if not shape.duration_s else shape.duration_s * 3 + 30
    cpu = time.process_time()
    run = run_endpoint(spec, url, deadline_s=deadline, options=EndpointOptions(rtt_samples=1))
    cpu_s = time.process_time() - cpu
    ok = [r for r in run.records if r.error is None and r.ttft_ms is not None]
    if not ok:
        return f"failed: no request ended ({len(run.records)} sent, {run.unsent} unsent)"
    ttft = statistics.median(r.ttft_ms or 0.0 for r in ok)
    tpot = statistics.median((r.e2e_ms - (r.ttft_ms or 0.0)) / (r.output_tokens - 1) for r in ok)
    return Measured(ttft, tpot, cpu_s)


def clients(peers: str, venvs: Path) -> list[tuple[str, Client]]:
    """sark-node, then each peer named in `peers` (comma-separated) whose venv could be made."""
    found: list[tuple[str, Client]] = [("sark-node", _sark)]
    for name in filter(None, peers.split(",")):
        package, run = PEERS[name]
        folder = venv(venvs, name, package)
        if folder is not None:
            found.append((name, partial(run, folder)))
    return found


def schedule_args(parser: argparse.ArgumentParser) -> None:
    """The server's schedule and the peers, as both client benchmarks take them."""
    parser.add_argument("--first-ms", type=float, default=200.0)
    parser.add_argument("--every-ms", type=float, default=25.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--peers", default="")
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/sark-peers"))


@dataclass(frozen=True)
class Bench:
    """One benchmark's scheduled server (its URL and log), work folder and clients."""

    server: subprocess.Popen[str]
    url: str
    log: Path
    work: Path
    tools: list[tuple[str, Client]]

    def close(self) -> None:
        """End the server (it stops when its stdin closes)."""
        self.server.communicate("", timeout=30)


def open_bench(args: argparse.Namespace, stem: str) -> Bench:
    """The work folder under `--venvs`, the scheduled server (logging to `stem`-pid.log) and the
    clients, as `schedule_args` asked."""
    work = args.venvs / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{stem}-{os.getpid()}.log"
    server, url = start_server(args.first_ms, args.every_ms, args.tokens, log)
    return Bench(server, url, log, work, clients(args.peers, args.venvs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", default="1,8,32")
    schedule_args(parser)
    args = parser.parse_args()
    bench = open_bench(args, "server")
    log, work = bench.log, bench.work
    rows: list[dict[str, object]] = []
    load = os.getloadavg()[0]
    print(
        f"load average {load:.2f}; schedule {args.first_ms:g} ms, then {args.every_ms:g} ms"
        f" x {args.tokens - 1}"
    )
    head = ("client", "conc", "TTFT ms", "server", "error", "TPOT ms", "server", "error")
    widths = (14, 5, 9, 9, 7, 8, 8, 7)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)) + "  load")
    try:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for name, run in bench.tools:
                since = log_lines(log)
                measured = run(bench.url, Shape(concurrency, args.requests), args.tokens, work)
                time.sleep(0.5)
                if isinstance(measured, str):
                    print(f"{name:>14} {concurrency:>5}  {measured[:300]}")
                    rows.append({"client": name, "concurrency": concurrency, "failed": measured})
                    continue
                s_ttft, s_tpot, n = _server_figures(log, since)
                ttft, tpot = measured.ttft_ms, measured.tpot_ms
                load = os.getloadavg()[0]
                print(
                    f"{name:>14} {concurrency:>5} {ttft:>9.2f} {s_ttft:>9.2f} {abs(ttft - s_ttft):>7.2f}"
                    f" {tpot:>8.3f} {s_tpot:>8.3f} {abs(tpot - s_tpot):>7.3f}  {load:.2f}"
                )
                rows.append(
                    {"client": name, "concurrency": concurrency, "ttft_ms": ttft, "server_ttft_ms": s_ttft,
                     "tpot_ms": tpot, "server_tpot_ms": s_tpot, "server_requests": n, "load": load}
                )  # fmt: skip
    finally:
        bench.close()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
