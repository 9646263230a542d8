"""A generate block's ``capacity:`` mapping -> the `GenerateSpec` fields of a capacity search.

``capacity: {slo: {ttft_ms, tpot_ms}, goodput_pct: 90, max_concurrency: 256}`` searches closed-loop
concurrency levels; ``rate: {min, max}`` in place of ``max_concurrency`` searches open-loop request
rates. ``level_s`` (and ``level_requests``) bound each level; ``max_error_pct`` is the error share
that ends a level early. The search itself is `protocol.capacity`; it runs only against a model
server (an ``endpoint:`` job), and picks its own levels, so the block takes no ``concurrency``,
``request_rate`` or ``duration_s`` beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from protocol.capacity import MAX_LEVELS
from scheduler.language.problems import Problems, check_keys, describe, number

CAPACITY_FIELDS: Final = (
    "slo",
    "goodput_pct",
    "max_concurrency",
    "rate",
    "level_s",
    "level_requests",
    "max_error_pct",
    "rate_resolution_pct",
)
RATE_FIELDS: Final = ("min", "max")
SLO_FIELDS: Final = ("ttft_ms", "tpot_ms", "e2e_ms")  # every job's generate.slo has these too
_FIXED_LOAD: Final = ("concurrency", "request_rate", "duration_s")


def capacity_fields(raw: Mapping[str, object], where: str, problems: Problems) -> dict[str, object] | None:
    """The generate block's capacity search as `GenerateSpec` fields (``capacity`` and its ``slo``), or
    None when the block asks for none; problems are recorded at ``jobs[0].generate.capacity.<field>``."""
    if "capacity" not in raw:
        return None
    block, where = raw["capacity"], f"{where}.capacity"
    if not isinstance(block, dict):
        problems.add(where, f"expected a mapping ({', '.join(CAPACITY_FIELDS)}), got {describe(block)}")
        return {}
    check_keys(block, where, CAPACITY_FIELDS, problems)
    for name in _FIXED_LOAD:
        if name in raw:
            problems.add(where, f"a capacity search picks its own load levels: drop generate.{name}")
    if "slo" in block and "slo" in raw:
        problems.add(f"{where}.slo", "give the SLO once: in capacity, or in generate, not both")
    slo = block.get("slo", raw.get("slo"))
    if not isinstance(slo, dict) or not any(slo.get(name) is not None for name in SLO_FIELDS):
        problems.add(
            f"{where}.slo", f"required: at least one of {', '.join(SLO_FIELDS)}, got {describe(slo)}"
        )
    else:
        check_keys(slo, f"{where}.slo", SLO_FIELDS, problems)
    search = {k: v for k, v in block.items() if k not in ("slo", "rate")}
    rate = block.get("rate")
    if isinstance(rate, dict):
        check_keys(rate, f"{where}.rate", RATE_FIELDS, problems)
        search |= {"rate_min": rate.get("min"), "rate_max": rate.get("max")}
        levels = rate_levels(rate.get("min"), rate.get("max"), block.get("rate_resolution_pct", 10.0))
        if levels is not None and levels > MAX_LEVELS:
            problems.add(
                f"{where}.rate",
                f"{number(rate.get('min')):g} to {number(rate.get('max')):g} req/s needs up to {levels} "
                f"levels, over the {MAX_LEVELS} one search result holds",
            )
    elif rate is not None:
        problems.add(f"{where}.rate", f"expected a mapping with min and max (req/s), got {describe(rate)}")
    return {"capacity": search, "slo": slo}


def rate_levels(low: object, high: object, resolution_pct: object) -> int | None:
    """The most levels a request-rate search from `low` to `high` may run (`protocol.capacity.next_level`):
    doubling from `low` to `high`, then bisecting a doubled gap until it is within `resolution_pct`;
    None when the numbers are not yet valid (the spec's own checks name them)."""
    low_n, high_n, resolution = number(low), number(high), number(resolution_pct)
    if low_n is None or high_n is None or resolution is None:
        return None
    if not 0 < low_n <= high_n or not 0 < resolution <= 100:
        return None
    doubling = math.ceil(math.log2(high_n) - math.log2(low_n)) + 1  # a quotient of the two may overflow
    return doubling + math.ceil(math.log2(100.0 / resolution))


__all__ = ["CAPACITY_FIELDS", "SLO_FIELDS", "capacity_fields", "rate_levels"]
