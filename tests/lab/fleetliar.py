"""A hostile fleet member for tests: the real `sark-node join`, whose records lie before it signs them.

Run as `python tests/lab/fleetliar.py MODE join ...`. It is the node's own worker with its own key;
only `Targets.measure` (the endpoint run) is wrapped, in this process. It sends its dealt requests as
an honest member does, then, by MODE:

- `fabricate`: adds `FABRICATED` records it never sent (copies of its real ones at invented planned
  times within the run);
- `duplicate`: keeps the first half of its records and repeats them, so it claims no more records
  than it was dealt.

Either way every figure is then derived again from the lying records (`protocol.derive`), as the
submitter would derive them, so the result is self-consistent and only the deal can refute it.
Nothing in the product reads this file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final

import trio

from node.cli import main
from node.worker.targets import Targets
from protocol import Endpoint, Measurement, RequestRecord, TaskSpec, derive

FABRICATED: Final = 3000
_honest = Targets.measure


def _fabricated(records: tuple[RequestRecord, ...], duration_s: float) -> list[RequestRecord]:
    made = []
    for i in range(FABRICATED):
        planned = duration_s * i / FABRICATED + 1e-4  # never one of the deal's times
        made.append(records[i % len(records)].with_(planned_s=planned, started_s=planned + 0.001))
    return [*records, *made]


def _lie(m: Measurement, spec: TaskSpec, mode: str) -> Measurement:
    assert m.generation is not None
    assert spec.generate is not None
    records = m.generation.records
    if mode == "fabricate":
        lying = _fabricated(records, spec.generate.duration_s or 1.0)
    else:
        half = records[: len(records) // 2]
        lying = [*half, *half]
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in lying)
    return derive(m.with_(generation=m.generation.with_(records=tuple(lying), wall_s=wall)), spec)


Measure = Callable[[Targets, TaskSpec, Endpoint, trio.CancelScope], Coroutine[Any, Any, Measurement]]


def lying(mode: str) -> Measure:
    """`Targets.measure` that lies as `mode` says after measuring honestly."""

    async def measure(
        self: Targets, spec: TaskSpec, endpoint: Endpoint, stop: trio.CancelScope
    ) -> Measurement:
        return _lie(await _honest(self, spec, endpoint, stop), spec, mode)

    return measure


if __name__ == "__main__":
    Targets.measure = lying(sys.argv.pop(1))  # type: ignore[method-assign,assignment]  # this process only
    main()
