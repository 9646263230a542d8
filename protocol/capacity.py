"""Capacity under an SLO: which load level to try next, when a level is over-saturated, and the knee.

Pure: levels, records and verdicts in, the next level or a verdict out. The worker's driver
(`drivers.endpoint.capacity`) runs the levels `next_level` picks and ends a level as soon as `saturation`
judges it over-saturated; it then calls `derive_capacity` on what it measured. The submitter calls
the same function on the signed result (`protocol.derive`): every level's figures come again from
its own records, the search is replayed from those verdicts (each level must be the one the search
picks after the ones before it), and the knee is the one the records give, not the worker's word.

A level passes when it ran to its end (not ended early) and its goodput, the share of its requests
that succeeded and met every SLO (`genstats.meets_slo`), is at least `goodput_pct`. The knee is the
highest passing level below the lowest failing one; the search doubles from the lowest level until
one fails or the top is reached, then bisects between the knee and the first failure (concurrency:
until they are adjacent; rates: until they are within `rate_resolution_pct`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pydantic import Field

from protocol.base import Value
from protocol.generation import CapacitySpec, GenerateSpec, GenerationStats, RequestRecord
from protocol.genstats import meets_slo, summarize_generation
from protocol.stats import median

EndCode = Literal["ttft_rising", "errors", "slo_unreachable"]
MAX_SEARCH_RECORDS: Final = 2_500
"""Request records a search keeps over all its levels (all travel in one signed result); the search
stops, unfinished, there. The driver also bounds them by their token times' size."""
SEARCH_BYTES: Final = 3 << 20
"""What a search's records may take packed (an envelope holds 4 MiB less 64 KiB): at most
`SEARCH_BYTES` / (`max_new_tokens` x `TOKEN_BYTES` + `RECORD_BYTES`) records, a token time packing to
9 bytes and the rest of a textless record to about 200."""
TOKEN_BYTES: Final = 9
RECORD_BYTES: Final = 200
MAX_LEVELS: Final = 64
"""Levels one search result holds (the campaign's range must need no more: `scheduler.language.capacity`)."""
MIN_EVIDENCE: Final = 10
"""Requests a level must have ended before it may be judged over-saturated."""
MIN_RISING: Final = 12
"""Requests with a first token needed to call first-token times rising (four in each third)."""
RISE_FACTOR: Final = 2.0
"""Rising steadily: the thirds' medians (by send time) increase and the last is this many times the first."""


class LevelEnd(Value):
    """Why a level was ended before its time: over-saturated, so it fails without running out."""

    code: EndCode
    detail: str = Field(max_length=500)


class CapacityLevel(Value):
    """One load level the search ran: the level, its figures (with its raw records) and its verdict."""

    level: float = Field(gt=0)  # a concurrency or a request rate (req/s), as the search's `by` says
    generation: GenerationStats
    ended_early: LevelEnd | None = None
    passed: bool


class CapacityResult(Value):
    """A capacity search from one vantage point: every level tried, in order, and the knee."""

    by: Literal["concurrency", "request_rate"]
    goodput_pct: float = Field(gt=0, le=100)
    levels: tuple[CapacityLevel, ...] = Field(max_length=MAX_LEVELS)
    knee: float | None  # the highest passing level below the first failing one; None: the lowest failed
    first_fail: float | None  # the lowest failing level; None: the top level passed
    finished: bool  # False: the task's time ran out before the search had its answer


def by(capacity: CapacitySpec) -> Literal["concurrency", "request_rate"]:
    """What the search varies: closed-loop concurrency, or open-loop request rate."""
    return "concurrency" if capacity.max_concurrency is not None else "request_rate"


def bounds(tried: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(knee, first failure) of the levels tried so far, each (level, passed)."""
    failed = [level for level, ok in tried if not ok]
    first_fail = min(failed) if failed else None
    passed = [level for level, ok in tried if ok and (first_fail is None or level < first_fail)]
    return (max(passed) if passed else None), first_fail


def next_level(capacity: CapacitySpec, tried: Sequence[tuple[float, bool]]) -> float | None:
    """The next level to run after `tried` (each (level, passed), in order), or None: the search is done."""
    closed = capacity.max_concurrency is not None
    lowest = 1.0 if closed else float(capacity.rate_min or 0.0)
    top = float(capacity.max_concurrency or capacity.rate_max or 0.0)
    if not tried:
        return lowest
    knee, fail = bounds(tried)
    if knee is None:
        return None  # the lowest level failed: nothing below it to find
    if fail is None:
        return None if knee >= top else min(2 * knee, top)
    if closed:
        return None if fail - knee <= 1 else float((knee + fail) // 2)
    return None if fail <= knee * (1 + capacity.rate_resolution_pct / 100) else (knee + fail) / 2


def search_budget(generate: GenerateSpec) -> int:
    """The records a whole search may keep: `MAX_SEARCH_RECORDS`, or fewer at long answers."""
    return min(MAX_SEARCH_RECORDS, SEARCH_BYTES // (generate.max_new_tokens * TOKEN_BYTES + RECORD_BYTES))


def level_budgets(generate: GenerateSpec, kept: Sequence[int]) -> list[int]:
    """The most requests each level may send (`kept`: the records each level run so far kept), and
    last the next level's: the search's budget less what the levels before took, and at most
    `level_requests`. The driver sends no more; the submitter replays the same from the records."""
    capacity = generate.capacity
    assert capacity is not None
    budget, out = search_budget(generate), []
    for count in (*kept, 0):
        out.append(max(0, min(capacity.level_requests or budget, budget)))
        budget -= count
    return out


def level_spec(generate: GenerateSpec, level: float) -> GenerateSpec:
    """The load one level of the search runs: the job's workload at that level, for `level_s` seconds."""
    capacity = generate.capacity
    assert capacity is not None
    load: dict[str, object] = (
        {"concurrency": int(level)} if by(capacity) == "concurrency" else {"request_rate": level}
    )
    return generate.with_(duration_s=capacity.level_s, capacity=None, **load)


def saturation(records: Sequence[RequestRecord], generate: GenerateSpec) -> LevelEnd | None:
    """Why the level these ended requests belong to is plainly over-saturated, or None.

    Judged on the requests ended so far, in any order: errors over `max_error_pct`; more requests
    missing the SLO than `goodput_pct` allows of `level_requests` (the level can no longer pass);
    first-token times rising steadily with send time (a queue growing: the medians of the first,
    middle and last third increase and the last is `RISE_FACTOR` times the first, and over the
    TTFT SLO when one is set).
    """
    capacity = generate.capacity
    assert capacity is not None
    done = len(records)
    if done < MIN_EVIDENCE:
        return None
    errors = sum(1 for r in records if r.error is not None)
    if errors * 100 > capacity.max_error_pct * done:
        detail = f"{errors} of {done} requests failed, over the {capacity.max_error_pct:g} % allowed"
        return LevelEnd(code="errors", detail=detail)
    if capacity.level_requests is not None:
        missed = sum(1 for r in records if not meets_slo(r, generate.slo))
        if missed * 100 > capacity.level_requests * (100 - capacity.goodput_pct):
            detail = (
                f"{missed} of at most {capacity.level_requests} requests missed the SLO: goodput can "
                f"no longer reach {capacity.goodput_pct:g} %"
            )
            return LevelEnd(code="slo_unreachable", detail=detail)
    return _rising(records, generate)


def _rising(records: Sequence[RequestRecord], generate: GenerateSpec) -> LevelEnd | None:
    timed = sorted(
        ((r.started_s, r.ttft_ms) for r in records if r.error is None and r.ttft_ms is not None),
        key=lambda pair: pair[0],
    )
    if len(timed) < MIN_RISING:
        return None
    third = len(timed) // 3
    first, middle, last = (
        median([ttft for _, ttft in part])
        for part in (timed[:third], timed[third : len(timed) - third], timed[len(timed) - third :])
    )
    limit = generate.slo.ttft_ms
    if first < middle < last and last >= RISE_FACTOR * first and (limit is None or last > limit):
        detail = (
            f"median TTFT by send time rose {first:.0f} -> {middle:.0f} -> {last:.0f} ms over "
            f"{len(timed)} requests: a queue is growing"
        )
        return LevelEnd(code="ttft_rising", detail=detail)
    return None


def level_passed(stats: GenerationStats, ended: LevelEnd | None, capacity: CapacitySpec) -> bool:
    """A level passes when it ran to its end and its goodput reached `goodput_pct`."""
    goodput = stats.goodput
    return ended is None and goodput is not None and goodput * 100 >= capacity.goodput_pct


def derive_capacity(result: CapacityResult, generate: GenerateSpec) -> CapacityResult:
    """The search as its levels' raw records give it: each level's figures, end and verdict derived
    again, the levels kept while each is the one the search picks next, the knee from their verdicts.

    A level that says it ended early is judged again on its records (a claim they do not bear out
    derives as not ended, and differs); readings without raw parts (RTT, TLS, client overhead, client CPU,
    unsent sends) are kept as measured.
    """
    capacity = generate.capacity
    assert capacity is not None
    tried: list[tuple[float, bool]] = []
    levels: list[CapacityLevel] = []
    for given in result.levels:
        expected = next_level(capacity, tried)
        if expected is None:
            break
        raw = given.generation
        stats = summarize_generation(
            raw.records,
            raw.wall_s,
            level_spec(generate, expected),
            cpu_pct=raw.client_cpu_pct,
            unsent=raw.unsent,
        ).with_(rtt_ms=raw.rtt_ms, tls_ms=raw.tls_ms, client_overhead_ms=raw.client_overhead_ms)
        ended = None if given.ended_early is None else saturation(raw.records, generate)
        passed = level_passed(stats, ended, capacity)
        levels.append(CapacityLevel(level=expected, generation=stats, ended_early=ended, passed=passed))
        tried.append((expected, passed))
    knee, first_fail = bounds(tried)
    return CapacityResult(
        by=by(capacity),
        goodput_pct=capacity.goodput_pct,
        levels=tuple(levels),
        knee=knee,
        first_fail=first_fail,
        finished=next_level(capacity, tried) is None,
    )


def headline(result: CapacityResult) -> GenerationStats | None:
    """The figures a capacity task's own row shows: the knee level's, else the lowest level tried's;
    without its records, which that level in `result` carries (one copy on the wire, not two)."""
    for level in result.levels:
        if level.level == result.knee:
            return level.generation.with_(records=())
    return result.levels[0].generation.with_(records=()) if result.levels else None


__all__ = [
    "MAX_SEARCH_RECORDS",
    "RECORD_BYTES",
    "SEARCH_BYTES",
    "TOKEN_BYTES",
    "CapacityLevel",
    "CapacityResult",
    "EndCode",
    "LevelEnd",
    "bounds",
    "by",
    "derive_capacity",
    "headline",
    "level_budgets",
    "level_passed",
    "level_spec",
    "next_level",
    "saturation",
    "search_budget",
]
