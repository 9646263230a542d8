"""A gate at its connection cap: what it holds, what it refuses, and what a connection costs it.

A real `sark-node gate --max-connections CAP` on loopback; this process opens CAP + EXTRA libp2p hosts
of the node's own (`node.p2p.host`, each its own key, Noise and yamux as a worker's) and connects each
to the gate in turn, keeping every host open. Read side by side in the same run: the gate's RSS idle
(before any host) and at the cap, hence its memory per connection; how many dials were held and how
many refused, and with which cause (P33: past the cap a connection is closed before its handshake,
`ClosedAtHandshake`, "a full gate"). The dialling hosts live in this process: the gate's figures are
its own process's (`/proc/PID/status`).

    .venv/bin/python benchmarks/gate_cap.py [--cap 200] [--extra 20]
    .venv/bin/python benchmarks/gate_cap.py --role worker --cap 512    # a `join` worker at its cap

`--role worker`: the same for a real `sark-node join` worker (on a gate of its own, its cap set by
`SARK_MAX_CONNECTIONS`, said in its ready line; default 512, `node.p2p.host.NODE_CONNECTIONS`): what
its own connections cost it. It holds its connections to its gate too, so it takes the cap less those.

Prints a table and writes benchmarks/out/gate_cap.json (worker_cap.json for a worker).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

import trio  # noqa: E402
from kit.procs import LOOPBACK, SARK, Lab  # noqa: E402

from node.errors import NodeError  # noqa: E402
from node.p2p.gates import cause  # noqa: E402
from node.p2p.host import HostConfig, open_host  # noqa: E402


def rss_kib(pid: int) -> int:
    """A process's resident set, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


async def dial_all(addr: str, count: int, gate_pid: int) -> tuple[int, Counter[str], float, int]:
    """Open `count` hosts, each dialling `addr` (the gate, or the worker) and kept open: held, the
    refusals by cause, seconds, and the dialled process's RSS (KiB) with every host still connected."""
    refused: Counter[str] = Counter()
    held = 0
    start = time.monotonic()
    async with AsyncExitStack() as stack:
        for _ in range(count):
            host = await stack.enter_async_context(open_host(HostConfig(key_file=None, listen=(LOOPBACK,))))
            try:
                await host.connect(addr, timeout=10.0)
                held += 1
            except NodeError as exc:
                refused[cause(exc)] += 1
        seconds = time.monotonic() - start
        await trio.sleep(1.0)  # the gate's side settles (its handshake tasks end) before it is read
        at_cap = rss_kib(gate_pid)
    return held, refused, seconds, at_cap


def start_target(lab: Lab, tmp: str, role: str, cap: int) -> tuple[dict[str, Any], int]:
    """The process dialled (a gate with `--max-connections cap`, or a `join` worker with that cap, on a
    gate of its own): its ready event and pid, once it has settled."""
    gate_argv = [*SARK, "gate", "--listen", LOOPBACK, "--data-dir", f"{tmp}/gate", "--events"]
    if role == "gate":
        target = lab.start("gate", [*gate_argv, "--max-connections", str(cap)])
    else:
        gate = lab.start("gate", gate_argv).wait_event("ready", 60)["addrs"][0]
        argv = [*SARK, "join", "--gate", gate, "--listen", LOOPBACK, "--data-dir", f"{tmp}/worker"]
        env = {**os.environ, "SARK_MAX_CONNECTIONS": str(cap)}
        target = lab.start("worker", [*argv, "--open", "--no-calibrate", "--events"], env=env)
    ready = target.wait_event("ready", 120)
    time.sleep(2.0)  # past its ready line it bootstraps and settles: idle is read after
    return ready, target.popen.pid


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cap", type=int, default=200)
    parser.add_argument("--extra", type=int, default=20)
    parser.add_argument("--role", choices=("gate", "worker"), default="gate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            ready, pid = start_target(lab, tmp, args.role, args.cap)
            idle = rss_kib(pid)
            held, refused, seconds, at_cap = trio.run(dial_all, ready["addrs"][0], args.cap + args.extra, pid)
        finally:
            lab.close()
    per = (at_cap - idle) / max(held, 1)
    out = {
        "role": args.role,
        "cap": args.cap,
        "said": ready.get("max_connections"),
        "dialled": args.cap + args.extra,
        "held": held,
        "refused": dict(refused),
        "rss_idle_kib": idle,
        "rss_at_cap_kib": at_cap,
        "ratio_at_cap_over_idle": round(at_cap / idle, 3),
        "kib_per_connection": round(per, 1),
        "dial_seconds": round(seconds, 1),
    }
    flag = "--max-connections" if args.role == "gate" else "with SARK_MAX_CONNECTIONS"
    print(f"{args.role} {flag} {args.cap} (its ready line says {out['said']})")
    print(f"dialled {out['dialled']}: held {held}, refused {sum(refused.values())}")
    for why, n in refused.items():
        print(f"  {n} x {why}")
    ratio = out["ratio_at_cap_over_idle"]
    print(f"{args.role} RSS idle {idle / 1024:.1f} MiB, at the cap {at_cap / 1024:.1f} MiB (x{ratio})")
    print(f"per connection {per:.1f} KiB; {args.cap + args.extra} dials in {seconds:.1f} s")
    target = ROOT / "benchmarks" / "out" / ("gate_cap.json" if args.role == "gate" else "worker_cap.json")
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
