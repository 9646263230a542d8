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

from protocol import CapacityLevel, CapacityResult, Measurement
from scheduler.results.columns import cell
from scheduler.results.genrows import generation_columns, stat_cell

_SEARCH_ONLY: Final = ("CapacityKnee", "CapacityFirstFail", "CapacityFinished")


def capacity_columns(m: Measurement) -> dict[str, str]:
    """The capacity columns of a task's own row ({} when it searched nothing: they stay empty)."""
    found = m.capacity
    if found is None:
        return {}
    return {
        "CapacityRow": "knee",
        "CapacityBy": found.by,
        "CapacityKnee": cell("CapacityKnee", found.knee),
        "CapacityFirstFail": cell("CapacityFirstFail", found.first_fail),
        "CapacityGoodputPct": cell("CapacityGoodputPct", found.goodput_pct),
        "CapacityFinished": cell("CapacityFinished", found.finished),
    }


def level_rows(row: Mapping[str, str], found: CapacityResult) -> list[dict[str, str]]:
    """One row per level of the search, after the task's own `row`, each with that level's figures."""
    return [dict(row) | level_cells(row["JobId"], n, level) for n, level in enumerate(found.levels, start=1)]


def level_cells(task_id: str, n: int, level: CapacityLevel) -> dict[str, str]:
    """The cells of level `n`'s row (from 1) that its level gives (the rest are its task's row's):
    its id, its verdict, its figures, the search's answer left empty. One deriver: the submitter
    writes the level rows with it and `sark-node verify` derives them again with it from the signed
    search (`scheduler.results.mergeproof`)."""
    e2e = level.generation.e2e_ms
    ended = level.ended_early
    cells = dict.fromkeys(_SEARCH_ONLY, "") | generation_columns(level.generation)
    cells.update(
        JobId=f"{task_id}/{n}",
        CapacityRow="level",
        LevelPassed=cell("LevelPassed", level.passed),
        LevelEndedEarly="" if ended is None else ended.code,
        Detail="" if ended is None else ended.detail,
        InferenceMsFirst=stat_cell("InferenceMsFirst", level.generation.ttft_ms, "median"),
        InferenceMsMedian=stat_cell("InferenceMsMedian", e2e, "median"),
        InferenceMsAverage=stat_cell("InferenceMsAverage", e2e, "mean"),
        InferenceMsStdDev=stat_cell("InferenceMsStdDev", e2e, "stddev"),
        InferenceMsMin=stat_cell("InferenceMsMin", e2e, "min"),
        InferenceMsMax=stat_cell("InferenceMsMax", e2e, "max"),
        InferenceMsP90=stat_cell("InferenceMsP90", e2e, "p90"),
        InferenceMsP95=stat_cell("InferenceMsP95", e2e, "p95"),
        InferenceMsP99=stat_cell("InferenceMsP99", e2e, "p99"),
    )
    return cells


__all__ = ["capacity_columns", "level_cells", "level_rows"]
