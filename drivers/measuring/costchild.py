"""Each model's FLOPs and bytes per inference (`drivers.files.graphcost`), counted in one spawned child.

A model file is untrusted bytes (the submitter's user named it, a URL served it): `onnx.load` and shape
inference parse it in a child started by `spawning.start_child` under `COST_MEMORY_MB` of address space
above its own size, and the parent waits `COST_DEADLINE_S` at most for all of them, then kills it. The
child answers one message per model as it counts, so a graph that stops the child (a limit, a crash in
the parser) costs that model and those after it their count, never the ones before nor the caller:
each model's outcome is its `GraphCost` or a reason naming the file, the stage and the cause.

`count_costs` blocks (moments per model): the submitter calls it where it writes its files, in a
worker thread (`serve`) or at the campaign's end (`submit`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from drivers.files.graphcost import GraphCost, graph_cost
from drivers.measuring.spawning import Entry, Limits, NotStarted, start_child

COST_MEMORY_MB: Final = 4096
"""The child's address space above its own size: shape inference holds the graph a few times over."""
COST_DEADLINE_S: Final = 120.0
"""The whole count's wall-clock limit (a 100 MB graph takes a few seconds on a busy machine)."""


def main(conn: Connection, paths: dict[str, str]) -> None:
    """The child: each model's cost or the reason it has none, then "done"."""
    for key, name in paths.items():
        try:
            conn.send(("cost", key, graph_cost(Path(name))))
        except ValueError as exc:  # names the file and the stage
            conn.send(("failed", key, str(exc)[:300]))
        except Exception as exc:  # the child's boundary: onnx not importable, memory, whatever the type
            conn.send(("failed", key, f"{Path(name).name}: count: {type(exc).__name__}: {str(exc)[:300]}"))
    conn.send(("done",))
    conn.close()


def count_costs(
    paths: Mapping[str, Path], *, timeout_s: float = COST_DEADLINE_S, memory_mb: int = COST_MEMORY_MB
) -> dict[str, GraphCost | str]:
    """Every model's cost per inference by key, or why it has none (counted in one child, above)."""
    if not paths:
        return {}
    found: dict[str, GraphCost | str] = {}
    try:
        child = start_child(
            Entry("drivers.measuring.costchild", "main"),
            ({k: str(p) for k, p in paths.items()},),
            name="sark-costs",
            limits=Limits(address_space_mb=memory_mb),
        )
    except NotStarted as exc:
        return {key: f"{p.name}: count: {exc.detail}" for key, p in paths.items()}
    ended = f"timed out after {timeout_s:g} s"
    deadline = time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0 and child.receiver.poll(left):
            message = child.receive()
            if message is None:
                child.process.join()
                ended = child.ended()
                break
            if message[0] == "done":
                break
            if message[0] in ("cost", "failed") and message[1] in paths:
                found[message[1]] = message[2]
    except NotStarted as exc:
        ended = exc.detail
    finally:
        child.stop()
    return found | {k: f"{p.name}: count: {ended}" for k, p in paths.items() if k not in found}


__all__ = ["COST_DEADLINE_S", "COST_MEMORY_MB", "count_costs", "main"]
