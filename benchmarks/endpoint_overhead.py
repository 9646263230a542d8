"""Endpoint client accuracy: sark's TTFT and TPOT against a loopback server with a known schedule.

A scripted server (tests/kit/sse_server.py, threads, 127.0.0.1) sends the first delta after
`--first-ms`, then one every `--every-ms`, `--tokens` deltas in all, then the usage chunk and
`[DONE]`. Each trial runs the same requests three times, back to back, order alternating: through
sark's endpoint client (`drivers.endpoint.load`: trio sockets and h11, reads stamped by the kernel's
arrival time, decoded as it arrives (issue 41), records); through the stack sark used before issue 33
(httpx on trio, each read stamped when httpx hands it over and parsed at once); and through a bare
baseline (a raw trio socket that timestamps each read holding a content delta, no HTTP library, no
parsing): the HTTP/SSE options side by side. Each one's CPU per request is its trio thread's CPU
time (`time.thread_time`; the server's threads are not counted) over the run, over the requests.
TTFT and TPOT medians come from the records per protocol.FORMULAS:
TPOT = (e2e - ttft) / (output_tokens - 1). The target: sark within 5 % + 2 ms of the schedule.
Prints the figures; writes benchmarks/out/endpoint_overhead.json.

Usage: .venv/bin/python benchmarks/endpoint_overhead.py [--requests 8] [--concurrency 1] [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

from kit.sse_server import scheduled, serve_sse  # noqa: E402

from drivers.endpoint.load import EndpointOptions, run_endpoint  # noqa: E402
from protocol import Endpoint, GenerateSpec, Prompt, RequestRecord  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "endpoint_overhead.json"


def _spec(requests: int, concurrency: int, tokens: int) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(requests))
    return GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=tokens,
        concurrency=concurrency,
        endpoint=Endpoint(model="schedule"),
    )


def _ttft_tpot(records: list[tuple[float, float, int]]) -> tuple[float, float]:
    """Medians of TTFT and TPOT from (ttft_ms, e2e_ms, output_tokens), as protocol.FORMULAS defines them."""
    ttft = statistics.median(t for t, _, _ in records)
    tpot = statistics.median((e - t) / (n - 1) for t, e, n in records if n >= 2)
    return ttft, tpot


def _of_records(records: tuple[RequestRecord, ...]) -> list[tuple[float, float, int]]:
    bad = [r.error_detail for r in records if r.error]
    if bad:
        raise SystemExit(f"sark's client reported errors: {bad[:3]}")
    return [(r.ttft_ms or 0.0, r.e2e_ms, r.output_tokens) for r in records]


async def _bare_one(port: int, body: bytes) -> tuple[float, float, int]:
    """One request on a raw socket: the time of each read that holds a content delta, nothing else."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    sent = time.perf_counter_ns()
    await stream.send_all(head + body)
    times: list[float] = []
    tokens = 0
    async with stream:
        while data := await stream.receive_some(65536):
            now = time.perf_counter_ns()
            deltas = data.count(b'"delta"')
            if deltas:
                times.append((now - sent) / 1e6)
                tokens += deltas
    return times[0], times[-1], tokens


async def _httpx(port: int, requests: int, concurrency: int) -> list[tuple[float, float, int]]:
    """The stack before issue 33, as one loop: httpx on trio, each read stamped after httpx handed it
    over, parsed at once (`drivers.endpoint.sse`)."""
    import httpx

    from drivers.endpoint.sse import SseDecoder, read_chunk

    body = {"model": "schedule", "messages": [{"role": "user", "content": "x"}], "stream": True}
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    results: list[tuple[float, float, int]] = []
    todo = iter(range(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=None, trust_env=False, limits=limits) as client:

        async def worker() -> None:
            for _ in todo:
                decoder, times = SseDecoder(), list[float]()
                sent = time.perf_counter_ns()
                async with client.stream("POST", url, json=body) as response:
                    async for raw in response.aiter_bytes():
                        now = time.perf_counter_ns()
                        for event in decoder.feed(raw):
                            if read_chunk(event).text:
                                times.append((now - sent) / 1e6)
                results.append((times[0], times[-1], len(times)))

        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
    return results


async def _bare(port: int, requests: int, concurrency: int, tokens: int) -> list[tuple[float, float, int]]:
    body = json.dumps({"model": "schedule", "messages": [{"role": "user", "content": "x"}], "stream": True})
    results: list[tuple[float, float, int]] = []
    todo = iter(range(requests))

    async def worker() -> None:
        for _ in todo:
            results.append(await _bare_one(port, body.encode()))

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--first-ms", type=float, default=200.0)
    parser.add_argument("--every-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    texts = [f" t{i}" for i in range(args.tokens)]
    reply = scheduled(texts, first_s=args.first_ms / 1e3, every_s=args.every_ms / 1e3, usage=(3, args.tokens))
    spec = _spec(args.requests, args.concurrency, args.tokens)
    trials = []
    with serve_sse(lambda body, attempt: reply) as server:
        port = int(server.url.rsplit(":", 1)[1])
        for trial in range(args.trials):
            order = ("sark", "httpx", "bare") if trial % 2 == 0 else ("bare", "httpx", "sark")
            figures: dict[str, dict[str, float | None]] = {}
            for who in order:
                if who == "sark":
                    cpu = time.thread_time()  # the server's threads are not counted: only trio's
                    run = run_endpoint(spec, server.url, deadline_s=120.0, options=EndpointOptions())
                    cpu_ms = (time.thread_time() - cpu) * 1e3 / max(1, len(run.records))
                    ttft, tpot = _ttft_tpot(_of_records(run.records))
                    figures[who] = {
                        "ttft_ms": ttft,
                        "tpot_ms": tpot,
                        "rtt_ms": run.rtt.connect_ms,
                        "client_overhead_ms": run.client_overhead_ms,
                        "read_overhead_ms": run.read_overhead_ms,
                        "cpu_per_request_ms": cpu_ms,
                    }
                else:
                    cpu = time.thread_time()
                    if who == "httpx":
                        bare = trio.run(_httpx, port, args.requests, args.concurrency)
                    else:
                        bare = trio.run(_bare, port, args.requests, args.concurrency, args.tokens)
                    cpu_ms = (time.thread_time() - cpu) * 1e3 / max(1, len(bare))
                    ttft, tpot = _ttft_tpot(bare)
                    figures[who] = {"ttft_ms": ttft, "tpot_ms": tpot, "cpu_per_request_ms": cpu_ms}
            trials.append(figures)
    return _report(args, trials)


def _within(measured: float, expected: float) -> bool:
    return abs(measured - expected) <= 0.05 * expected + 2.0


def _report(args: argparse.Namespace, trials: list[dict[str, dict[str, float | None]]]) -> int:
    print(
        f"schedule: first delta after {args.first_ms:.0f} ms,"
        f" then {args.tokens - 1} x {args.every_ms:.0f} ms; {args.requests} requests"
        f" at concurrency {args.concurrency}, {args.trials} trials"
    )
    columns = ("TTFT p50 ms", "TPOT p50 ms", "RTT ms", "parse/req ms", "CPU/req ms")
    print(
        f"{'trial':>5} {'who':>5} {columns[0]:>12} {columns[1]:>12} {columns[2]:>8} {columns[3]:>13}"
        f" {columns[4]:>11}"
    )
    ok = True
    for i, figures in enumerate(trials):
        for who in ("sark", "httpx", "bare"):
            f = figures[who]
            ttft, tpot = float(f["ttft_ms"] or 0), float(f["tpot_ms"] or 0)
            rtt, parse, cpu = f.get("rtt_ms"), f.get("client_overhead_ms"), f.get("cpu_per_request_ms")
            print(
                f"{i:>5} {who:>5} {ttft:>12.2f} {tpot:>12.3f} {'' if rtt is None else f'{rtt:.3f}':>8}"
                f" {'' if parse is None else f'{parse:.3f}':>13} {'' if cpu is None else f'{cpu:.3f}':>11}"
            )
            if who == "sark":
                ok = ok and _within(ttft, args.first_ms) and _within(tpot, args.every_ms)
    verdict = "within" if ok else "NOT within"
    print(f"sark's TTFT and TPOT medians are {verdict} 5 % + 2 ms of the schedule in every trial")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    summary = {"python": platform.python_version(), "args": vars(args), "within": ok, "trials": trials}
    OUT.write_text(json.dumps(summary, indent=1))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
