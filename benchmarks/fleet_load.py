"""Fleet load on this machine: the highest request rate 1, 2 and 4 workers hold on one clock.

A gate and 4 `sark-node join` worker processes on loopback, and a fast scripted stub in this process
(tests/kit/sse_server.py: first delta after `--first-ms`, then `--tokens - 1` more every `--every-ms`,
the usage chunk, `[DONE]`). For each fleet size N, `sark-node submit` runs one endpoint job with
`fleet: {workers: N, seed: S}` at rising request rates (`--rates`, each for `--duration` s, Poisson
arrivals dealt among the N members, one start instant) and reads the merged `Endpoint (fleet)` row.
A rate is held when ScheduleLagMsP99 < `--lag-ms` (10), RequestRateAchieved keeps up with the
rate's seeded schedule (at least 90 % of its requests sent within the window; the count itself
is Poisson, so it is set against the schedule, not against rate x duration) and no request failed;
every rate of the ladder is run (it stops once p99 lag passes 1 s or a request fails), and the
highest held is reported. The merged row's TTFT
median is set against the stub's first-delta delay. Every worker shares this machine's cores with the
stub, the gate and the submitter, so the figures bound what this machine holds, not what a fleet of
machines would. Prints a table; writes benchmarks/out/fleet_load.json.

Usage: .venv/bin/python benchmarks/fleet_load.py [--sizes 1 2 4] [--rates 10 25 50 100 200 400]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from swarmlab import OUT, SARK, Lab, start_workers, submitter_id

from protocol.arrivals import arrivals

FIELDS = ("Requests", "RequestRateAchieved", "ScheduleLagMsP99", "ClientCpuMaxPct", "ClientSaturated",
          "TtftMsMedian", "TtftMsP99", "E2eMsMedian", "Errors", "RequestPerS")  # fmt: skip


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rates", type=float, nargs="+", default=[10, 25, 50, 100, 200, 400])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--lag-ms", type=float, default=10.0)
    parser.add_argument("--first-ms", type=float, default=20.0)
    parser.add_argument("--every-ms", type=float, default=2.0)
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=24)
    return parser.parse_args()


def _run(root: Path, gate: str, url: str, size: int, rate: float, a: argparse.Namespace) -> dict[str, Any]:
    """One campaign at `rate` from `size` members; the merged row's figures."""
    out = root / f"out-{size}-{rate:g}"
    generate = {"prompts": "builtin:summaries", "max_new_tokens": a.tokens, "request_rate": rate,
                "duration_s": a.duration}  # fmt: skip
    job = {"endpoint": {"url": url, "model": "stub"}, "generate": generate,
           "fleet": {"workers": size, "seed": a.seed}}  # fmt: skip
    campaign = root / f"fleet-{size}-{rate:g}.json"
    campaign.write_text(json.dumps({"name": f"fleet-{size}-{rate:g}", "jobs": [job]}))
    argv = [*SARK, "submit", str(campaign), "--json", "--gate", gate, "--wait-peers", str(size),
            "--data-dir", str(root / "submitter"), "--out", str(out), "--allow-http"]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return {"rate": rate, "error": done.stderr.strip().splitlines()[-1:]}
    files = json.loads(done.stdout.strip().splitlines()[-1])["files"]
    with open(files["csv"], newline="") as f:
        [merged] = [r for r in csv.DictReader(f) if r["ComputeUnits"] == "Endpoint (fleet)"]
    figures: dict[str, Any] = {"rate": rate, "submit_s": round(time.monotonic() - started, 1)}
    figures |= {k: merged[k] for k in FIELDS} | _lags(Path(files["json"]))
    lag, achieved = float(merged["ScheduleLagMsP99"]), float(merged["RequestRateAchieved"])
    figures["scheduled"] = len(arrivals(rate, a.duration, a.seed))  # the Poisson count this seed asks
    on_time = achieved * a.duration >= 0.9 * figures["scheduled"]  # sent within the window
    figures["held"] = lag < a.lag_ms and on_time and merged["Errors"] == "0"
    return figures


def _lags(path: Path) -> dict[str, float]:
    """p50 and p90 of actual minus planned send time (ms) over every member's raw records."""
    document = json.loads(path.read_text())
    lags = sorted(
        (r["started_s"] - r["planned_s"]) * 1e3
        for entry in document["results"]
        if entry["signed"] and entry["signed"]["measurement"]["generation"]
        for r in entry["signed"]["measurement"]["generation"]["records"]
        if r.get("planned_s") is not None
    )
    if not lags:
        return {}
    return {
        "lag_p50_ms": round(lags[len(lags) // 2], 3),
        "lag_p90_ms": round(lags[int(0.9 * (len(lags) - 1))], 3),
    }


def _ladder(root: Path, gate: str, url: str, size: int, a: argparse.Namespace) -> dict[str, Any]:
    tried = []
    for rate in a.rates:
        figures = _run(root, gate, url, size, rate, a)
        tried.append(figures)
        print(f"  {size} worker(s) at {rate:g} req/s: " + ", ".join(f"{k}={v}" for k, v in figures.items()))
        if "error" in figures or float(figures["ScheduleLagMsP99"]) > 1000 or figures["Errors"] != "0":
            break  # far past what it holds: the rest of the ladder would only queue
    held = [t["rate"] for t in tried if t.get("held")]
    return {"size": size, "highest_held": max(held, default=None), "tried": tried}


def main() -> None:
    a = _args()
    from kit.sse_server import scheduled, serve_sse

    texts = [f" t{i}" for i in range(a.tokens)]

    def script(body: dict[str, object], attempt: int) -> Any:
        return scheduled(texts, first_s=a.first_ms / 1e3, every_s=a.every_ms / 1e3, usage=(8, a.tokens))

    with tempfile.TemporaryDirectory(prefix="fleet-load-") as tmp, serve_sse(script) as server:
        root = Path(tmp)
        lab = Lab(root)
        try:
            gate = lab.gate().ready["addrs"][0]
            me = submitter_id(root / "submitter")
            start_workers(lab, max(a.sizes), gate, me, "--allow-http", "--allow-network", "127.0.0.0/8")
            results = [_ladder(root, gate, server.url, size, a) for size in a.sizes]
        finally:
            lab.close()
    stub = {"first_ms": a.first_ms, "every_ms": a.every_ms, "tokens": a.tokens}
    document = {"machine": platform.node(), "cpus": os.cpu_count(), "duration_s": a.duration,
                "lag_limit_ms": a.lag_ms, "stub": stub, "results": results}  # fmt: skip
    print(f"\nstub: first delta after {a.first_ms:g} ms; {os.cpu_count()} cores shared by everything")
    print(f"workers  highest rate held (p99 lag < {a.lag_ms:g} ms)  merged TTFT median there")
    for r in results:
        at = [t for t in r["tried"] if t["rate"] == r["highest_held"]]
        ttft = at[0]["TtftMsMedian"] if at else "-"
        print(f"{r['size']:>7}  {r['highest_held'] or '-':>34}  {ttft}")
    OUT.mkdir(exist_ok=True)
    (OUT / "fleet_load.json").write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
