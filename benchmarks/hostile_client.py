"""The endpoint client against hostile servers: how long its event loop pauses, how much memory it takes.

For each fault of tests/kit/hostile.py (a server process of its own, raw sockets on 127.0.0.1),
`drive_endpoint` runs `--requests` requests at once with the default run budget
(`drivers.endpoint.budget`), no retries, until the fault ends them or `--deadline` passes, beside a trio task
that wakes every 50 ms and keeps the longest gap between two wakes, and the process's peak RSS. A
watcher thread also reports, while it lasts, a loop that has not woken for seconds (so a client that
blocks for minutes is seen while it blocks, even if it is killed). Prints one line per fault; writes
benchmarks/out/hostile_client.json.

Usage: .venv/bin/python benchmarks/hostile_client.py [--faults hugeline,endless] [--requests 16]
       [--deadline 10]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.endpoint.completion import RetryPolicy  # noqa: E402
from drivers.endpoint.load import EndpointOptions, drive_endpoint  # noqa: E402
from protocol import Endpoint, GenerateSpec, Prompt  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "hostile_client.json"
HOSTILE = ROOT / "tests" / "kit" / "hostile.py"
TICK_S = 0.05


def _spec(requests: int) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(requests))
    return GenerateSpec(
        prompts=prompts, prompts_sha256="0" * 64, endpoint=Endpoint(model="m"), concurrency=requests
    )


def _watch(last_tick: list[float], stop: threading.Event) -> None:
    """Say, every second it lasts past the first, that the loop has not woken."""
    said = 0.0
    while not stop.wait(0.25):
        lag = time.monotonic() - last_tick[0]
        if lag >= said + 1.0:
            said = lag
            print(f"  the loop has not woken for {lag:.1f} s", flush=True)
        elif lag < 0.5:
            said = 0.0


async def _measure(url: str, requests: int, deadline_s: float) -> dict[str, object]:
    me = psutil.Process()
    base = me.memory_info().rss
    seen = {"gap": 0.0, "rss": base}
    last_tick = [time.monotonic()]
    stop = threading.Event()
    threading.Thread(target=_watch, args=(last_tick, stop), daemon=True).start()

    async def tick() -> None:
        last = trio.current_time()
        while True:
            await trio.sleep(TICK_S)
            now, last_tick[0] = trio.current_time(), time.monotonic()
            seen["gap"] = max(seen["gap"], now - last)
            seen["rss"] = max(seen["rss"], me.memory_info().rss)
            last = now

    options = EndpointOptions(rtt_samples=1, retry=RetryPolicy(max_retries=0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        started = trio.current_time()
        run = await drive_endpoint(_spec(requests), url, deadline_s, options)
        took = trio.current_time() - started
        nursery.cancel_scope.cancel()
    stop.set()
    return {
        "seconds": round(took, 2),
        "max_loop_gap_s": round(seen["gap"], 3),
        "peak_rss_growth_mib": round((seen["rss"] - base) / 2**20, 1),
        "kinds": dict(Counter(str(r.error) for r in run.records)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default="hugeline,endless,slowloris,gzipbomb,deepjson,http500")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--deadline", type=float, default=10.0)
    args = parser.parse_args()
    child = subprocess.Popen(
        [sys.executable, "-P", str(HOSTILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdin is not None
    root = child.stdout.readline().split()[1]
    results = {}
    try:
        for fault in args.faults.split(","):
            figures = trio.run(_measure, f"{root}/{fault}/v1", args.requests, args.deadline)
            results[fault] = figures
            print(f"{fault} x{args.requests}: {figures}", flush=True)
    finally:
        child.stdin.close()
        child.kill()
        child.wait(10)
    OUT.parent.mkdir(exist_ok=True)
    machine = {"python": platform.python_version(), "cpus": psutil.cpu_count(), "load": psutil.getloadavg()}
    OUT.write_text(json.dumps({"machine": machine, "requests": args.requests, "faults": results}, indent=2))


if __name__ == "__main__":
    main()
