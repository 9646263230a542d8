"""A capacity search from this vantage point: the levels `protocol.capacity` picks, each one a load run.

Each level is a `drive_endpoint` run of the job's workload at that concurrency or request rate, for
the search's `level_s` (and at most `level_requests` requests). A watch judges the level on the
requests ended so far (`protocol.capacity.saturation`) and ends it as soon as it is plainly
over-saturated: nothing more is sent, and the requests then in flight end unrecorded, so the level's
records are exactly those the verdict was reached on, and the submitter reaches it again from them.
A level's requests must end within `level_s` plus `LEVEL_GRACE` (then they fail as `deadline`). The search
stops when it has its answer, when the task's time left is shorter than a level, or when the levels
together hold `MAX_SEARCH_RECORDS`, or as many as `SEARCH_BYTES` holds at `max_new_tokens` token
times each. Level records keep no output text unless the job asks for ROUGE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import trio

from drivers.endpoint.completion import Outcome
from drivers.endpoint.load import EndpointOptions, drive_endpoint
from protocol import CapacityLevel, CapacityResult, GenerateSpec, LevelEnd, RequestRecord
from protocol.capacity import (
    MIN_EVIDENCE,
    by,
    derive_capacity,
    level_budgets,
    level_passed,
    level_spec,
    next_level,
    saturation,
)
from protocol.genstats import summarize_generation

LEVEL_GRACE: Final = (2.0, 10.0)
"""A level's deadline: `level_s` x 2 + 10 s (its requests still in flight after `level_s` end by then)."""
EVERY_FROM: Final = 100
"""Past this many ended requests, a level is judged on every `EVERY`-th one (the check sorts them all)."""
EVERY: Final = 10


@dataclass
class _Watch:
    """Judges one level each time a request ends; keeps the verdict that ended it."""

    generate: GenerateSpec
    ended: LevelEnd | None = None

    def __call__(self, outcomes: Sequence[Outcome]) -> bool:
        done = len(outcomes)
        if done < MIN_EVIDENCE or (done > EVERY_FROM and done % EVERY):
            return False
        self.ended = saturation([o.record for o in outcomes], self.generate)
        return self.ended is not None


def _textless(record: RequestRecord) -> RequestRecord:
    """A level's record without its output text (only ROUGE reads it): the search keeps many."""
    return record.with_(output_text="", text_dropped=True) if record.output_text else record


async def search_capacity(
    generate: GenerateSpec, url: str, deadline_s: float, options: EndpointOptions
) -> CapacityResult:
    """Run the capacity search of `generate` against the server at `url` within `deadline_s` seconds.

    Returns:
        Every level run, with its records, figures and verdict, and the knee, as
        `protocol.capacity.derive_capacity` gives them (the submitter derives the same).
    """
    capacity = generate.capacity
    assert capacity is not None
    deadline = trio.current_time() + deadline_s
    levels: list[CapacityLevel] = []
    tried: list[tuple[float, bool]] = []
    kept: list[int] = []
    factor, grace = LEVEL_GRACE
    while (level := next_level(capacity, tried)) is not None:
        left = deadline - trio.current_time()
        most = level_budgets(generate, kept)[-1]
        if left < capacity.level_s or most <= 0:
            break
        spec = level_spec(generate, level)
        watch = _Watch(generate)
        run = await drive_endpoint(
            spec,
            url,
            min(left, capacity.level_s * factor + grace),
            replace(options, max_requests=most, watch=watch),
        )
        records = run.records if "rouge" in generate.quality else tuple(map(_textless, run.records))
        stats = summarize_generation(records, run.wall_s, spec, cpu_pct=run.cpu_pct, unsent=run.unsent).with_(
            rtt_ms=run.rtt.connect_ms, tls_ms=run.rtt.tls_ms, client_overhead_ms=run.client_overhead_ms
        )
        passed = level_passed(stats, watch.ended, capacity)
        levels.append(CapacityLevel(level=level, generation=stats, ended_early=watch.ended, passed=passed))
        tried.append((level, passed))
        kept.append(len(records))
    measured = CapacityResult(
        by=by(capacity),
        goodput_pct=capacity.goodput_pct,
        levels=tuple(levels),
        knee=None,
        first_fail=None,
        finished=False,
    )
    return derive_capacity(measured, generate)


__all__ = ["search_capacity"]
