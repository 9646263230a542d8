"""The highest open-loop rate one sark client process holds against a no-op server (p99 send lag < 5 ms).

A no-op OpenAI-compatible server runs in its own process (asyncio, keep-alive, HTTP/1.1 chunked): it
answers every request at once with one content delta, the usage chunk and `[DONE]`, and counts the
requests it saw. sark's endpoint job (`drivers.endpoint.load.run_endpoint`, Poisson arrivals from the seeded
generator) runs at each rate of `--rates` for `--duration` seconds; each level prints the asked and
achieved send rate (sent within the schedule's span / span), the rate the server saw, the send lag
p50/p99 (actual first byte written - planned), the client's CPU and its `ClientSaturated` verdict.
The answer: the highest rate whose p99 send lag is under 5 ms with the server-seen rate within 5 % of
the planned one (the seeded Poisson schedule's own count over the level, which the asked rate only
approximates). Writes benchmarks/out/noop_rate.json.

Usage: .venv/bin/python benchmarks/noop_rate.py [--rates 100,200,400,800] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.endpoint.load import EndpointOptions, run_endpoint  # noqa: E402
from protocol import Endpoint, GenerateSpec, Prompt  # noqa: E402
from protocol.arrivals import arrivals  # noqa: E402
from protocol.genstats import summarize_generation  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "noop_rate.json"
LAG_MS = 5.0
SEED = 33

SERVER = r"""
import asyncio, json, sys
delta = json.dumps({"object": "chunk", "choices": [{"index": 0, "delta": {"content": "ok"}}]})
usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
body = f"data: {delta}\n\ndata: {usage}\n\ndata: [DONE]\n\n".encode()
reply = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
         + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
seen = 0

async def serve(reader, writer):
    global seen
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            seen += 1
            writer.write(reply)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def control():
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        print(seen, flush=True)

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await control()

asyncio.run(main())
"""


def _spec(rate: float, duration: float) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(64))
    return GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=1,
        request_rate=rate,
        duration_s=duration,
        endpoint=Endpoint(model="noop"),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="100,200,400,800")
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin is not None
    assert server.stdout is not None
    port = int(server.stdout.readline())
    url = f"http://127.0.0.1:{port}"
    levels = []
    print(f"load average {os.getloadavg()[0]:.2f}; {args.duration:g} s a level; no-op server on port {port}")
    head = ("asked", "planned", "sent/s", "seen/s", "lag p50", "lag p99", "CPU %")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (7, 8, 8, 8, 8, 8, 6), strict=True)) + "  verdict")
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            server.stdin.write("\n")
            server.stdin.flush()
            before = int(server.stdout.readline())
            spec = _spec(rate, args.duration)
            run = run_endpoint(
                spec, url, deadline_s=args.duration * 3 + 10, options=EndpointOptions(seed=SEED)
            )
            server.stdin.write("\n")
            server.stdin.flush()
            seen = int(server.stdout.readline()) - before
            planned = len(arrivals(rate, args.duration, SEED)) / args.duration
            s = summarize_generation(run.records, run.wall_s, spec, cpu_pct=run.cpu_pct, unsent=run.unsent)
            level = {
                "asked": rate,
                "planned_per_s": planned,
                "sent_per_s": s.request_rate_achieved,
                "seen_per_s": seen / args.duration,
                "lag_p50_ms": s.schedule_lag_ms_p50,
                "lag_p99_ms": s.schedule_lag_ms_p99,
                "cpu_pct": s.client_cpu_pct,
                "saturated": s.client_saturated_reason,
                "errors": s.errors,
            }
            levels.append(level)
            print(
                f"{rate:>7g} {planned:>8.1f} {s.request_rate_achieved or 0:>8.1f}"
                f" {seen / args.duration:>8.1f}"
                f" {s.schedule_lag_ms_p50 or 0:>8.2f} {s.schedule_lag_ms_p99 or 0:>8.2f}"
                f" {s.client_cpu_pct or 0:>6.0f}  {s.client_saturated_reason or 'held'}"
                + (f" ({s.errors} errors)" if s.errors else "")
            )
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    held = [
        lv["asked"]
        for lv in levels
        if (lv["lag_p99_ms"] or 0) < LAG_MS
        and abs(lv["seen_per_s"] - lv["planned_per_s"]) <= 0.05 * lv["planned_per_s"]
    ]
    best = max(held, default=None)
    said = "none" if best is None else f"{best:g} req/s"
    print(f"highest rate held with p99 send lag under {LAG_MS:g} ms: {said}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"levels": levels, "best": best, "duration_s": args.duration}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
