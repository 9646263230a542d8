"""A gate at its connection cap: what it holds, what it refuses, and what a connection costs it.

A real `sark-node gate --max-connections CAP` on loopback; this process opens CAP + EXTRA libp2p hosts
of the node's own (`node.p2p.host`, each its own key, Noise and yamux as a worker's) and connects each
to the gate in turn, keeping every host open. Read side by side in the same run: the gate's RSS idle
(before any host) and at the cap, hence its memory per connection; how many dials were held and how
many refused, and with which cause (P33: past the cap a connection is closed before its handshake,
`ClosedAtHandshake`, "a full gate"). The dialling hosts live in this process: the gate's figures are
its own process's (`/proc/PID/status`).

    .venv/bin/python benchmarks/gate_cap.py [--cap 200] [--extra 20]

Prints a table and writes benchmarks/out/gate_cap.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

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
    """Open `count` hosts, each dialling the gate and kept open: held, the refusals by cause, seconds,
    and the gate's RSS (KiB) with every host still connected."""
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cap", type=int, default=200)
    parser.add_argument("--extra", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            argv = [*SARK, "gate", "--listen", LOOPBACK, "--data-dir", f"{tmp}/gate", "--events"]
            gate = lab.start("gate", [*argv, "--max-connections", str(args.cap)])
            ready = gate.wait_event("ready", 60)
            time.sleep(2.0)  # past its ready line the gate bootstraps and settles: idle is read after
            pid = gate.popen.pid
            idle = rss_kib(pid)
            held, refused, seconds, at_cap = trio.run(dial_all, ready["addrs"][0], args.cap + args.extra, pid)
        finally:
            lab.close()
    per = (at_cap - idle) / max(held, 1)
    out = {
        "cap": args.cap,
        "said": ready.get("max_connections"),
        "dialled": args.cap + args.extra,
        "held": held,
        "refused": dict(refused),
        "gate_rss_idle_kib": idle,
        "gate_rss_at_cap_kib": at_cap,
        "ratio_at_cap_over_idle": round(at_cap / idle, 3),
        "kib_per_connection": round(per, 1),
        "dial_seconds": round(seconds, 1),
    }
    print(f"gate --max-connections {args.cap} (its ready line says {out['said']})")
    print(f"dialled {out['dialled']}: held {held}, refused {sum(refused.values())}")
    for why, n in refused.items():
        print(f"  {n} x {why}")
    ratio = out["ratio_at_cap_over_idle"]
    print(f"gate RSS idle {idle / 1024:.1f} MiB, at the cap {at_cap / 1024:.1f} MiB (x{ratio})")
    print(f"per connection {per:.1f} KiB; {args.cap + args.extra} dials in {seconds:.1f} s")
    target = ROOT / "benchmarks" / "out" / "gate_cap.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
