"""The highest open-loop rate each LLM load client holds, side by side, judged by what the server saw.

The scheduled server of `llm_clients.py` (its own process; first token after `--first-ms`, then one
every `--every-ms`, `--tokens` in all; it logs when it read each request and wrote each token) takes
each client in turn at each rate of `--rates`: sark-node's endpoint job in this process (Poisson
arrivals, `request_rate` and `duration_s`), GuideLLM (`--rate-type poisson --rate R --max-seconds D`)
and AIPerf (`--request-rate R --benchmark-duration D`, Poisson by default) when `--peers` names them,
from the venvs `llm_clients.py` makes. At each rate the tools run one after the other (the order
rotated from one rate to the next), so they share the machine's conditions.

No tool's own word on its rate is used. The server-seen rate is (n - 1) / span over the n requests
the server read during that client's run, span = last read - first read (the same rule for every
tool). Load is what asks for the run's `--tokens` output tokens, as every client is told to: a
connection check asking for 1 token (GuideLLM sends 1, then 1 a worker process) or none (AIPerf
sends 1) is left out. So is each client's first second of load (`--warmup`): GuideLLM 0.3.0's
Poisson schedule plans floor(R) requests at its start instant (its `initial_burst`, on by default
and not settable from its CLI), and a tool whose clock starts before its sending processes catches
up at first; each tool is judged on its steady stream. A rate is held when the server-seen rate is
within 5 % of the asked rate R, or, as the draw of a Poisson schedule varies, within its band 2 *
sqrt(R * span) / span, whichever is wider. A client that falls behind shows either way: what it
sends late stretches the span, what it never sends shrinks n. Each row also gives the client's own
TTFT median (over all it sent) beside the server's (over the requests counted), the client's CPU
(sark: this process's CPU time over `run_endpoint`; a peer: its whole process tree, start-up
included, from the children's rusage) and the load average. Writes benchmarks/out/client_rates.json.

Usage: .venv/bin/python benchmarks/client_rates.py [--rates 20,40,80,160,320] [--duration 8]
       [--warmup 1] [--peers guidellm,aiperf] [--first-ms 200] [--every-ms 25] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_clients import (
    ROOT,
    Client,
    log_lines,
    open_bench,
    schedule_args,
    server_entries,
)
from peer_tools import Measured, Shape

OUT = ROOT / "benchmarks" / "out" / "client_rates.json"
WITHIN = 0.05


def seen(log: Path, since: int, tokens: int, warmup_s: float) -> tuple[int, float, float | None]:
    """The load requests the server read since line `since` (those asking for `tokens`, from
    `warmup_s` after the first one on), the span of their read times (s) and the server's TTFT median
    (ms) over those it answered in full."""
    load = sorted((e for e in server_entries(log, since) if e["asked"] == tokens), key=_read)
    entries = [e for e in load if _read(e) >= _read(load[0]) + warmup_s * 1e9] if load else []
    reads = [_read(e) for e in entries]
    span = (reads[-1] - reads[0]) / 1e9 if len(reads) > 1 else 0.0
    ttft = [(_first_write(e) - _read(e)) / 1e6 for e in entries if e["done"]]
    return len(reads), span, statistics.median(ttft) if ttft else None


def _read(entry: dict[str, object]) -> int:
    return int(str(entry["read"]))


def _first_write(entry: dict[str, object]) -> int:
    writes = entry["writes"]
    assert isinstance(writes, list)
    return int(writes[0])


def held(rate: float, asked: float, span_s: float) -> bool:
    """Within 5 % of the asked rate, or within the Poisson band of the asked count over the span."""
    if span_s <= 0:
        return False
    band = max(WITHIN * asked, 2 * math.sqrt(asked * span_s) / span_s)
    return abs(rate - asked) <= band


def _level(
    name: str, run: Client, url: str, shape: Shape, args: argparse.Namespace, log: Path, work: Path
) -> dict[str, object]:
    """One client at one rate: what the server saw, the client's TTFT beside the server's, its CPU."""
    since = log_lines(log)
    started = time.monotonic()
    measured = run(url, shape, args.tokens, work)
    wall_s = time.monotonic() - started
    time.sleep(1.5)  # the server logs a request its client left when its next write fails
    n, span, server_ttft = seen(log, since, args.tokens, args.warmup)
    rate = (n - 1) / span if span > 0 else 0.0
    row: dict[str, object] = {
        "client": name,
        "asked": shape.rate,
        "server_requests": n,
        "span_s": span,
        "seen_per_s": rate,
        "held": held(rate, shape.rate, span),
        "server_ttft_ms": server_ttft,
        "wall_s": wall_s,
        "load": os.getloadavg(),
    }
    if isinstance(measured, Measured):
        row |= {"ttft_ms": measured.ttft_ms, "cpu_s": measured.cpu_s}
    else:
        row |= {"failed": measured}
    return row


HEAD = ("client", "asked", "n", "span s", "seen/s", "held", "TTFT ms", "server", "CPU s", "wall s")
WIDTHS = (10, 6, 5, 6, 7, 5, 8, 8, 6, 6)


def _print(row: dict[str, object]) -> None:
    ttft, server, cpu = row.get("ttft_ms"), row["server_ttft_ms"], row.get("cpu_s")
    load = row["load"]
    assert isinstance(load, tuple)
    cells = (
        row["client"],
        f"{row['asked']:g}",
        row["server_requests"],
        f"{row['span_s']:.2f}",
        f"{row['seen_per_s']:.1f}",
        "yes" if row["held"] else "NO",
        "-" if ttft is None else f"{ttft:.1f}",
        "-" if server is None else f"{server:.1f}",
        "-" if cpu is None else f"{cpu:.1f}",
        f"{row['wall_s']:.1f}",
    )
    line = " ".join(f"{c:>{w}}" for c, w in zip(cells, WIDTHS, strict=True))
    failed = row.get("failed")
    print(f"{line}  {load[0]:.2f}" + (f"  {str(failed)[:200]!r}" if failed else ""), flush=True)


def verdict(rows: list[dict[str, object]], names: list[str]) -> dict[str, float | None]:
    """Each client's highest asked rate held (None: none held); printed with sark-node's standing."""
    best: dict[str, float | None] = {}
    for name in names:
        rates = [float(str(r["asked"])) for r in rows if r["client"] == name and r["held"]]
        best[name] = max(rates, default=None)
        print(f"highest rate held, {name}: {'none' if best[name] is None else f'{best[name]:g} req/s'}")
    peers = [b for n, b in best.items() if n != "sark-node" and b is not None]
    if peers:
        ours = best.get("sark-node") or 0.0
        said = "holds" if ours >= max(peers) else "does NOT hold"
        print(f"sark-node {said} the best peer's rate ({ours:g} vs {max(peers):g} req/s)")
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="20,40,80,160,320")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    schedule_args(parser)
    args = parser.parse_args()
    bench = open_bench(args, "rates")
    tools = bench.tools
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average"
        f" {' '.join(f'{x:.2f}' for x in os.getloadavg())}; schedule {args.first_ms:g} ms, then"
        f" {args.every_ms:g} ms x {args.tokens - 1}; {args.duration:g} s a run"
    )
    print(" ".join(f"{h:>{w}}" for h, w in zip(HEAD, WIDTHS, strict=True)) + "  load")
    rows: list[dict[str, object]] = []
    try:
        for k, rate in enumerate(float(r) for r in args.rates.split(",")):
            shift = k % len(tools)
            for name, run in tools[shift:] + tools[:shift]:
                shape = Shape(rate=rate, duration_s=args.duration)
                row = _level(name, run, bench.url, shape, args, bench.log, bench.work)
                _print(row)
                rows.append(row)
    finally:
        bench.close()
    print(f"{time.strftime('%H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()}")
    best = verdict(rows, [name for name, _ in tools])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    arguments = {k: str(v) for k, v in vars(args).items()}
    OUT.write_text(json.dumps({"args": arguments, "rows": rows, "best": best}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
