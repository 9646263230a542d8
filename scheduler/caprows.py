"""The rows of a capacity search: the task's own `Capacity` row with the knee, and one row per level.

The task's row (`CapacityRow` = ``knee``) shows the knee level's figures in the generation columns
and the search's answer: `CapacityKnee` (the highest level that met the SLO at `CapacityGoodputPct`),
`CapacityFirstFail`, `CapacityBy` (concurrency or request_rate) and `CapacityFinished` (False: the
task's time ran out first). Each level tried follows it (`CapacityRow` = ``level``, `JobId`
``<task>/<n>`` in the order run), with its own generation and latency columns, `LevelPassed`, and
`LevelEndedEarly` with the reason in `Detail` when it was ended as over-saturated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from protocol import CapacityResult, Measurement
from scheduler.genrows import generation_columns

CAPACITY_COLUMNS: Final = (
    "CapacityRow",
    "CapacityBy",
    "CapacityKnee",
    "CapacityFirstFail",
    "CapacityGoodputPct",
    "CapacityFinished",
    "LevelPassed",
    "LevelEndedEarly",
)
_SEARCH_ONLY: Final = ("CapacityKnee", "CapacityFirstFail", "CapacityFinished")


def _level(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def capacity_columns(m: Measurement) -> dict[str, str]:
    """The capacity columns of a task's own row ({} when it searched nothing: they stay empty)."""
    found = m.capacity
    if found is None:
        return {}
    return {
        "CapacityRow": "knee",
        "CapacityBy": found.by,
        "CapacityKnee": _level(found.knee),
        "CapacityFirstFail": _level(found.first_fail),
        "CapacityGoodputPct": f"{found.goodput_pct:g}",
        "CapacityFinished": "True" if found.finished else "False",
    }


def level_rows(row: Mapping[str, str], found: CapacityResult) -> list[dict[str, str]]:
    """One row per level of the search, after the task's own `row`, each with that level's figures."""
    rows: list[dict[str, str]] = []
    for n, level in enumerate(found.levels, start=1):
        e2e = level.generation.e2e_ms
        ended = level.ended_early
        cells = dict(row) | dict.fromkeys(_SEARCH_ONLY, "") | generation_columns(level.generation)
        cells.update(
            JobId=f"{row['JobId']}/{n}",
            CapacityRow="level",
            LevelPassed="True" if level.passed else "False",
            LevelEndedEarly="" if ended is None else ended.code,
            Detail="" if ended is None else ended.detail,
            InferenceMsFirst=f"{level.generation.ttft_ms.median:.3f}",
            InferenceMsMedian=f"{e2e.median:.3f}",
            InferenceMsAverage=f"{e2e.mean:.3f}",
            InferenceMsStdDev=f"{e2e.stddev:.3f}",
            InferenceMsMin=f"{e2e.min:.3f}",
            InferenceMsMax=f"{e2e.max:.3f}",
            InferenceMsP90=f"{e2e.p90:.3f}",
            InferenceMsP95=f"{e2e.p95:.3f}",
            InferenceMsP99=f"{e2e.p99:.3f}",
        )
        rows.append(cells)
    return rows


__all__ = ["CAPACITY_COLUMNS", "capacity_columns", "level_rows"]
