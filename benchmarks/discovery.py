"""Discovery time: a gate and N `join` processes; time from a fresh node's start until it has every advert.

Workers run `sark-node join --profile FILE` (a fixed device profile: no driver probes or calibration, so
the figures are the network part only) and are started all at once. For each N the fresh node is run
three ways, three times each:

- `peers`: the whole `sark-node peers --json` process, from exec to exit (interpreter, imports, host,
  lookup, shutdown);
- `fresh node`: a child process that times itself from its first line: `import` (Python + libp2p),
  `open` (host up, gate connected, DHT bootstrapped) and `lookup` (`Node.look` until every
  advert is verified); `start->all` is the sum, the issue's figure.

Prints a table and writes benchmarks/out/discovery.json.
Run: .venv/bin/python benchmarks/discovery.py [N ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

T0 = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests"))


def fresh_node(gates: list[str], data_dir: str) -> None:
    """The child: time import, open_node and look from this process's first line; print JSON."""
    import trio

    from node.config import NodeConfig
    from node.p2p.node import open_node

    imported = time.monotonic()

    async def main() -> dict[str, Any]:
        config = NodeConfig(data_dir=Path(data_dir), gates=tuple(gates), listen=("/ip4/127.0.0.1/tcp/0",))
        start = time.monotonic()
        async with open_node(config, role="submitter") as node:
            opened = time.monotonic()
            peers = (await node.look(timeout=30)).peers
            done = time.monotonic()
        return {
            "import_s": imported - T0,
            "open_s": opened - start,
            "lookup_s": done - opened,
            "total_s": done - T0,
            "peer_ids": [p.peer_id for p in peers],
        }

    print(json.dumps(trio.run(main)), flush=True)


def _child(args: list[str]) -> tuple[float, str]:
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    return time.monotonic() - start, out.stdout.strip().splitlines()[-1]


def measure(gates: list[str], root: Path, expected: set[str]) -> dict[str, Any]:
    """One `peers` process and one timed fresh node."""
    from kit.procs import SARK

    stamp = time.monotonic_ns()
    gate_args = [arg for gate in gates for arg in ("--gate", gate)]
    wall, line = _child([*SARK, "peers", "--json", "--data-dir", str(root / f"peers-{stamp}"), *gate_args])
    peers_found = {p["peer_id"] for p in json.loads(line)["peers"]}
    _, line = _child([sys.executable, __file__, "--fresh", str(root / f"fresh-{stamp}"), *gates])
    fresh = json.loads(line)
    return {
        "peers_process_s": wall,
        "peers_found": len(peers_found & expected),
        **{k: v for k, v in fresh.items() if k != "peer_ids"},
        "fresh_found": len(set(fresh["peer_ids"]) & expected),
    }


def run(n: int, repeats: int = 3) -> dict[str, Any]:
    """Gate + n workers started at once, then `repeats` fresh lookups."""
    from kit.data import make_profile
    from kit.procs import Lab

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        profile = root / "profile.json"
        profile.write_text(make_profile().model_dump_json())
        lab = Lab(root)
        try:
            t0 = time.monotonic()
            gates = lab.gate().ready["addrs"]
            started = time.time()
            procs = [lab.worker(f"w{i}", gates, profile, wait=False) for i in range(n)]
            ready_s = []
            for proc in procs:
                proc.ready = proc.wait_event("ready", 180)
                ready_s.append(proc.ready["t"] - started)
            start_all = time.monotonic() - t0
            ids = {p.ready["peer_id"] for p in procs}
            runs = [measure(gates, root, ids) for _ in range(repeats)]
        finally:
            lab.close()
    med = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0] if k.endswith("_s")}
    return {
        "n": n,
        "start_all_s": round(start_all, 2),
        "worker_ready_p50_s": round(statistics.median(ready_s), 2),
        "worker_ready_max_s": round(max(ready_s), 2),
        "median": med,
        "found": [f"{r['fresh_found']}/{n}" for r in runs] + [f"{r['peers_found']}/{n}" for r in runs],
        "runs": runs,
    }


def main() -> None:
    """Run N = 5, 10, 20 (or the sizes given), print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="how many workers (default: 5 10 20)")
    sizes = parser.parse_args().sizes or [5, 10, 20]
    rows = [run(n) for n in sizes]
    head = (
        "N",
        "start all",
        "worker ready p50/max",
        "import",
        "open",
        "lookup",
        "start->all",
        "peers proc",
        "found",
    )
    print(" | ".join(head))
    for r in rows:
        m = r["median"]
        print(
            f"{r['n']} | {r['start_all_s']} s | {r['worker_ready_p50_s']}/{r['worker_ready_max_s']} s | "
            f"{m['import_s']} s | {m['open_s']} s | {m['lookup_s']} s | {m['total_s']} s | "
            f"{m['peers_process_s']} s | {', '.join(r['found'])}"
        )
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "discovery.json").write_text(json.dumps({"time": time.time(), "rows": rows}, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--fresh":
        fresh_node(sys.argv[3:], sys.argv[2])
    else:
        main()
