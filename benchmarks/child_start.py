"""A measuring child forked from the fork server against one spawned, side by side.

Every child the drivers start goes through `drivers.measuring.spawning.start_child`. On Linux it is
forked by multiprocessing's fork server, which imported the measuring modules once
(`drivers.measuring.forkhost`); before, each child was spawned: a new interpreter that imported
`protocol`, numpy and its entry again. Each round runs both in turn, so that the machine's load falls
on both alike:

- **start**: a child whose entry imports what the measuring child imports
  (`drivers.measuring.child`) and sends its own CPU time: the wall time from `start_child` to its
  answer, and the CPU the child spent to get there (its interpreter, its imports).
- **measure**: `drivers.measure` of the tiny ONNX model (one process, 10 runs): the wall time of
  the whole call, its child included.

Prints the medians and the ratio fork server / spawn, and writes benchmarks/out/child_start.json.

    .venv/bin/python benchmarks/child_start.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers import measure  # noqa: E402
from drivers.measuring import spawning  # noqa: E402
from drivers.measuring.spawning import STARTED, Entry, start_child  # noqa: E402
from protocol import ComputeUnit, TaskSpec  # noqa: E402

MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=10, warmups=1, load_runs=1, processes=1, threads=1)
METHODS = ("spawn", "forkserver")


def imported(conn: Connection) -> None:
    """A child's entry: import what the measuring child imports, then say the CPU spent so far."""
    import drivers.measuring.child  # noqa: F401

    used = resource.getrusage(resource.RUSAGE_SELF)
    conn.send(("cpu", used.ru_utime + used.ru_stime))


def _start() -> tuple[float, float]:
    """(wall s to the child's answer, the child's CPU s until then)."""
    began = time.perf_counter()
    child = start_child(Entry("child_start", "imported"), (), name="sark-bench")
    try:
        while (message := child.receive()) == (STARTED,):
            pass
        if message is None or message[0] != "cpu":
            raise SystemExit(f"the child answered {message!r}")
        return time.perf_counter() - began, float(message[1])
    finally:
        child.stop()


def _measure() -> float:
    began = time.perf_counter()
    measure(MODEL, SPEC)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {m: {"start": [], "cpu": [], "measure": []} for m in METHODS}
    chosen = spawning.start_method
    for i in range(args.rounds + 1):
        for method in METHODS if i % 2 else reversed(METHODS):
            spawning.start_method = lambda method=method: method  # type: ignore[misc]
            start, cpu = _start()
            whole = _measure()
            if i:  # the first round starts the fork server and warms the caches
                samples[method]["start"].append(start)
                samples[method]["cpu"].append(cpu)
                samples[method]["measure"].append(whole)
    spawning.start_method = chosen
    medians = {m: {k: statistics.median(v) for k, v in s.items()} for m, s in samples.items()}
    print(f"{'':12} {'start (s)':>10} {'child CPU (s)':>14} {'measure (s)':>12}")
    for method in METHODS:
        row = medians[method]
        print(f"{method:12} {row['start']:10.3f} {row['cpu']:14.3f} {row['measure']:12.3f}")
    ratio = {k: medians["forkserver"][k] / medians["spawn"][k] for k in ("start", "cpu", "measure")}
    print(f"{'ratio':12} {ratio['start']:10.3f} {ratio['cpu']:14.3f} {ratio['measure']:12.3f}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    document = {"rounds": args.rounds, "medians": medians, "ratio": ratio, "samples": samples}
    (out / "child_start.json").write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
