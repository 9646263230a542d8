"""A hostile load client for tests: the real `sark-node join`, whose records lie before it signs them.

Run as `python tests/kit/loadliar.py MODE join ...`. It is the node's own worker with its own key;
only `Targets.measure` (the endpoint run) is wrapped, in this process. It sends its requests as an
honest client does, then, by MODE:

- `fabricate` (a fleet member): adds `FABRICATED` records it never sent (copies of its real ones at
  invented planned times within the run);
- `duplicate` (a fleet member): keeps the first half of its records and repeats them, so it claims no
  more records than it was dealt;
- `reschedule` (a lone open loop, or a search over request rates): says each request was planned
  when it was really sent, as if it had kept a schedule of its own (no lag, whatever the seed the
  submitter gave it planned; a search's every level alike);
- `hide` (a lone open loop): keeps the records of its first half of sends (by planned time) and says
  no planned send was left unsent, hiding a backlog;
- `crowd` (a closed loop): adds a copy of each record sent a millisecond later, twice the requests
  in flight its slots could hold;
- `zero` (a closed loop): adds up to `ZERO_BURST` records of zero length (TTFT and E2E 0 ms) at the
  instant its last real one started: they never overlap, so only physics refutes them (issue 41:
  a member's 4,900 such records were counted as 5,018 requests at TTFT 0.000 ms).
- `tiny` (a closed loop, a fleet member's slots): as `zero`, but each record 0.5 us long (TTFT 0.4 us):
  above zero, under half any LAN round trip less 1 ms, so physics passes it and only a floor the
  member does not set refutes it (issue 50: 4,900 merged as 5,015 requests while the server saw 229).
- `double` (a lone closed loop for `duration_s`, gray-box): as `tiny`, but as many such records as it has
  real ones, less one, so that its median is still one of its real records: its count doubles and its
  figure stays (issue 50: replicas compared on the median alone agreed; their paces do not,
  `scheduler.verification.agreement.pace_of`).
- `pad` (a lone closed loop for `duration_s`): replaces its records by copies of its quickest real one,
  back to back in each slot from the run's start to its end plus `LATE_SLACK_S`, up to the slot
  bound: plausible records (real first tokens, at or above the server's floor, never
  more in flight than its slots, within slots x span / its shortest), so only the server's own count
  refutes them (`scheduler.verification.servercount`).

Either way every figure is then derived again from the lying records (`protocol.derive`), as the
submitter would derive them, so the result is self-consistent and only the schedule the submitter
gave can refute it. Nothing in the product reads this file.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final

import trio

from node.cli import main
from node.worker.targets import Targets
from protocol import Endpoint, Measurement, RequestRecord, TaskSpec, derive
from protocol.generation import MAX_RECORDS
from scheduler.verification import LATE_SLACK_S

FABRICATED: Final = 3000
ZERO_BURST: Final = 4900
_honest = Targets.measure


def _fabricated(records: tuple[RequestRecord, ...], duration_s: float) -> list[RequestRecord]:
    made = []
    for i in range(FABRICATED):
        planned = duration_s * i / FABRICATED + 1e-4  # never one of the deal's times
        made.append(records[i % len(records)].with_(planned_s=planned, started_s=planned + 0.001))
    return [*records, *made]


def _padded(records: tuple[RequestRecord, ...], slots: int, span_s: float) -> list[RequestRecord]:
    ok = [r for r in records if r.error is None]
    quickest = min(ok, key=lambda r: r.e2e_ms)
    per_slot = math.floor(span_s * 1e3 / quickest.e2e_ms) + 1  # the slot bound, to the request
    step = quickest.e2e_ms / 1e3  # back to back: one ends as the next starts
    return [quickest.with_(started_s=k * step) for _ in range(slots) for k in range(per_slot)]


def _own_schedule(records: tuple[RequestRecord, ...]) -> tuple[RequestRecord, ...]:
    return tuple(r.with_(planned_s=r.started_s) for r in records)


def _lie(m: Measurement, spec: TaskSpec, mode: str) -> Measurement:
    if m.capacity is not None and mode == "reschedule":  # each level's records, the search replayed
        levels = tuple(
            level.with_(generation=level.generation.with_(records=_own_schedule(level.generation.records)))
            for level in m.capacity.levels
        )
        return derive(m.with_(capacity=m.capacity.with_(levels=levels)), spec)
    assert m.generation is not None
    assert spec.generate is not None
    records, unsent = m.generation.records, m.generation.unsent
    # The first half of the sends: records are kept as requests end, which on a loaded machine is not
    # the order they were sent in (issue 41: halving that list skipped a planned send, and the check
    # refused the gap before it reached the hidden backlog). A closed loop has no planned times.
    half = sorted(records, key=lambda r: (r.planned_s or 0.0, r.started_s))[: len(records) // 2]
    if mode == "fabricate":
        lying = _fabricated(records, spec.generate.duration_s or 1.0)
    elif mode == "duplicate":
        lying = [*half, *half]
    elif mode == "reschedule":
        lying = list(_own_schedule(records))
    elif mode == "crowd":
        lying = [*records, *(r.with_(started_s=r.started_s + 0.001) for r in records)]
    elif mode == "pad":
        lying = _padded(records, spec.generate.concurrency, (spec.generate.duration_s or 1.0) + LATE_SLACK_S)
    elif mode in ("zero", "tiny", "double"):
        at = records[-1].started_s
        most = len(records) - 1 if mode == "double" else min(ZERO_BURST, MAX_RECORDS - len(records))
        first, last = (0.0, 0.0) if mode == "zero" else (0.0004, 0.0005)
        short = records[0].with_(
            started_s=at, ttft_ms=first, e2e_ms=last, ttfo_ms=first, token_times_ms=(first, last)
        )
        lying = [*records, *(short for _ in range(most))]
    else:  # hide
        lying, unsent = list(half), 0
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in lying)
    generation = m.generation.with_(records=tuple(lying), wall_s=wall, unsent=unsent)
    return derive(m.with_(generation=generation), spec)


Measure = Callable[[Targets, TaskSpec, Endpoint, trio.CancelScope], Coroutine[Any, Any, Measurement]]


def lying(mode: str) -> Measure:
    """`Targets.measure` that lies as `mode` says after measuring honestly."""

    async def measure(
        self: Targets, spec: TaskSpec, endpoint: Endpoint, stop: trio.CancelScope
    ) -> Measurement:
        honest = await _honest(self, spec, endpoint, stop)
        # off the node's loop, as the worker builds its own result (`node.worker.runner.sealed`): thousands
        # of records derived again hold the interpreter for seconds at load, and the liar's lease would
        # lapse for its own slowness before its lie was judged
        return await trio.to_thread.run_sync(_lie, honest, spec, mode)

    return measure


if __name__ == "__main__":
    Targets.measure = lying(sys.argv.pop(1))  # type: ignore[method-assign,assignment]  # this process only
    main()
