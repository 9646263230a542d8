"""The results room: what a campaign produced, as rows and files, and the one registry of their columns.

Pure, like the rest of `scheduler`. Every output (results.csv, results.json, the terminal and Markdown
tables, report.html, `report --diff`, the dashboard and the REST API) takes its columns from here;
no module outside this package names a column in a row it builds (tests/test_columns.py).

Modules:
    columns      the registry: Column (name, section, unit, form, formula), COLUMNS, CSV_COLUMNS, cell
    rows         result_row, failure_row, to_csv, results_document, seed_figures, shown_figures: a
                 task's row, the two files, the typed figures the REST API and dashboard get
    genrows      a generate task's columns (TTFT, TPOT, ITL, throughput, ROUGE, the policy columns)
    caprows      a capacity search's Capacity row (the knee) and one row per level
    energyrows   energy per inference and per token, power, method, note
    sustainrows  Throttled with its causes, window medians, the telemetry kept
    fleetrows    a fleet job's member rows and its merged row, from every member's raw records
    verifyrows   Verified, DeviceClass, Claim: how a replica group settled a row, the peer's claim mark
    typed        TaskResult: a task's typed value (its derived measurement, or how it ended), row_of
"""

from __future__ import annotations

from scheduler.results.caprows import capacity_columns, level_rows
from scheduler.results.columns import (
    BY_NAME,
    CAPACITY_COLUMNS,
    COLUMNS,
    CSV_COLUMNS,
    ENERGY_COLUMNS,
    EXTENDED_COLUMNS,
    FLEET_COLUMNS,
    GENERATION_COLUMNS,
    REFERENCE_COLUMNS,
    SEED_COLUMNS,
    SUSTAIN_COLUMNS,
    Column,
    Section,
    cell,
    cells,
    column_formulas,
    flag,
    names,
)
from scheduler.results.energyrows import energy_columns
from scheduler.results.fleetrows import (
    Member,
    fleet_columns,
    fleet_rows,
    member_row,
    merged_row,
    merged_stats,
)
from scheduler.results.genrows import generation_columns
from scheduler.results.rows import (
    Figure,
    failure_row,
    result_row,
    results_document,
    seed_figures,
    shown_figures,
    to_csv,
)
from scheduler.results.sustainrows import sustain_columns
from scheduler.results.typed import TaskResult, ended, measured, row_of

__all__ = [
    "BY_NAME",
    "CAPACITY_COLUMNS",
    "COLUMNS",
    "CSV_COLUMNS",
    "ENERGY_COLUMNS",
    "EXTENDED_COLUMNS",
    "FLEET_COLUMNS",
    "GENERATION_COLUMNS",
    "REFERENCE_COLUMNS",
    "SEED_COLUMNS",
    "SUSTAIN_COLUMNS",
    "Column",
    "Figure",
    "Member",
    "Section",
    "TaskResult",
    "capacity_columns",
    "cell",
    "cells",
    "column_formulas",
    "ended",
    "energy_columns",
    "failure_row",
    "flag",
    "fleet_columns",
    "fleet_rows",
    "generation_columns",
    "level_rows",
    "measured",
    "member_row",
    "merged_row",
    "merged_stats",
    "names",
    "result_row",
    "results_document",
    "row_of",
    "seed_figures",
    "shown_figures",
    "sustain_columns",
    "to_csv",
]
