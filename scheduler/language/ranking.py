"""A campaign's `rank:` block: what to rank each swept length's devices or servers by.

    rank:
      by: throughput        # best output tok/s among the points that meet every bound (the default)
      at: p90               # the latency figure each bound reads: median (default), p90 or p99
      ttft_ms: 500          # bounds, any of ttft_ms, tpot_ms, e2e_ms (at least one for throughput)
      max_error_pct: 1      # a point with a larger error share is not eligible (optional)

    rank: {by: goodput}     # most requests per second that met each job's generate.slo

`scheduler.results.ranking` applies it to the fronts' points (`scheduler.results.front`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal

from pydantic import Field

from protocol import Value
from scheduler.language.problems import Problems, check_keys, describe

RANK_BY: Final = ("throughput", "goodput")
RANK_AT: Final = ("median", "p90", "p99")
BOUNDS: Final = ("ttft_ms", "tpot_ms", "e2e_ms")
_FIELDS: Final = ("by", "at", *BOUNDS, "max_error_pct")


class Rank(Value):
    """What the campaign ranks by: `by` (throughput within the bounds at `at`, or goodput under each
    job's SLO), the latency bounds in ms, and the largest error share a point may have."""

    by: Literal["throughput", "goodput"] = "throughput"
    at: Literal["median", "p90", "p99"] = "median"
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    max_error_pct: float | None = Field(default=None, ge=0, le=100)

    def bounds(self) -> dict[str, float]:
        """The latency bounds given, by figure name (`ttft_ms`, `tpot_ms`, `e2e_ms`)."""
        return {name: v for name in BOUNDS if (v := getattr(self, name)) is not None}

    def says(self) -> str:
        """The rule in words, as every view titles the ranking."""
        if self.by == "goodput":
            said = "requests/s that met the job's generate.slo (request/s x goodput)"
        else:
            limits = " and ".join(f"{n.removesuffix('_ms').upper()} {self.at} <= {v:g} ms"
                                  for n, v in self.bounds().items())  # fmt: skip
            said = f"output tok/s at {limits}"
        if self.max_error_pct is not None:
            said += f", error share <= {self.max_error_pct:g} %"
        return said


def parse_rank(data: Mapping[str, object], problems: Problems) -> Rank | None:
    """The campaign's `rank:` block (None when absent), every problem recorded at its path."""
    raw = data.get("rank")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.add("rank", f"expected a mapping with by: and bounds, got {describe(raw)}")
        return None
    before = len(problems.items)
    check_keys(raw, "rank", _FIELDS, problems)
    by, at = raw.get("by", "throughput"), raw.get("at", "median")
    if by not in RANK_BY:
        problems.add("rank.by", f"expected one of {', '.join(RANK_BY)}, got {describe(by)}")
    if at not in RANK_AT:
        problems.add("rank.at", f"expected one of {', '.join(RANK_AT)}, got {describe(at)}")
    numbers = {n: raw[n] for n in (*BOUNDS, "max_error_pct") if n in raw}
    for name, value in numbers.items():
        top = 100.0 if name == "max_error_pct" else math.inf
        if isinstance(value, bool) or not isinstance(value, int | float) or not _within(value, name, top):
            problems.add(f"rank.{name}", f"expected a number {_range(name)}, got {describe(value)}")
    given = [n for n in BOUNDS if n in raw]
    if by == "throughput" and not given:
        problems.add("rank", f"ranking by throughput needs a latency bound: one of {', '.join(BOUNDS)}")
    if by == "goodput" and given:
        problems.add(
            "rank",
            f"goodput counts against each job's generate.slo; {', '.join(given)} is for by: throughput",
        )
    if len(problems.items) > before:
        return None
    return Rank.model_validate({"by": by, "at": at, **{n: float(v) for n, v in numbers.items()}})


def _within(value: float, name: str, top: float) -> bool:
    if not math.isfinite(value):
        return False
    return 0 <= value <= top if name == "max_error_pct" else value > 0


def _range(name: str) -> str:
    return "from 0 to 100" if name == "max_error_pct" else "above 0 (ms)"


__all__ = ["RANK_AT", "RANK_BY", "Rank", "parse_rank"]
