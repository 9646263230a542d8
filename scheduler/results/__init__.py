"""The results room: what a campaign produced, as rows and files, the one registry of their columns,
and the report shaped from them (entries, matrices, the LLM views, two campaigns compared).

Pure, like the rest of `scheduler`. Every output (results.csv, results.json, the terminal and Markdown
tables, report.html, `report --diff`, the dashboard and the REST API) takes its columns from here;
no module outside this package names a column in a row it builds (tests/unit/repository/test_columns.py).

Modules:
    columns      the registry: Column (name, section, unit, form, formula), COLUMNS, CSV_COLUMNS, cell
    rows         result_row, failure_row, to_csv, seed_figures, shown_figures: a
                 task's row, results.csv, the typed figures the REST API and dashboard get
    genrows      a generate task's columns (TTFT, TPOT, ITL, throughput, ROUGE, the policy columns)
    caprows      a capacity search's Capacity row (the knee) and one row per level
    energyrows   energy per inference and per token, power, method, note
    sustainrows  Throttled with its causes, window medians, the telemetry kept
    fleetrows    a fleet job's member rows and its merged row, from every member's raw records
    outputdiff   OutputMaxDiff: rows of one model compared on their outputs, against the first row
    verifyrows   Verified, DeviceClass, Claim: how a replica group settled a row, the peer's claim mark;
                 verification_counts: verified / unverifiable / outliers, submit's last line
    verifygroups each replica group's verification (GroupVerification: the agreed figure, the band, the
                 replicas' figures and networks, the outliers), derived once from the task views;
                 agreed_changes: two campaigns' agreed figures compared (`report --diff`)
    typed        TaskResult: a task's typed value (its derived measurement, or how it ended), row_of
    document     CampaignReport: results.json as one typed value (built once, or read once from a file);
                 every medium renders it
    report       a campaign report as data: entries, the device x unit matrix
    diff         two campaigns compared: tasks paired by worker, then device; each change tested
    significance the Mann-Whitney U test the diffs use
    prices       the one seam where a row's price is chosen and bounded (campaign, then owner); Costs
    costview     COST_FIGURES ($ / 1k inferences, $ / M tokens, per joule), cost_lines ranked, price_text
    costrows     priced (a TaskResult with its Price) and the cost columns' cells
    llmview      LLM_FIGURES: TTFT, TPOT, ITL, decode tok/s, ROUGE-L, each with its formula (the LLM views);
                 RUNTIME_RATES: a runtime's own pp and tg rates, shown where a run has them
"""

from __future__ import annotations

from scheduler.results.caprows import capacity_columns, level_rows
from scheduler.results.columns import (
    BY_NAME,
    CAPACITY_COLUMNS,
    COLUMNS,
    COST_COLUMNS,
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
from scheduler.results.costrows import cost_columns, priced
from scheduler.results.costview import (
    COST_FIGURES,
    RANKS,
    CostFigure,
    CostLine,
    cost_lines,
    figures_of,
    price_text,
)
from scheduler.results.diff import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD_PCT,
    DiffRow,
    compare,
    diff_entries,
    match_entries,
)
from scheduler.results.document import CampaignReport, Merged, ReportTask, ResultsFileError, Signed
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
from scheduler.results.llmview import (
    E2E,
    LLM_FIGURES,
    RUNTIME_RATES,
    THROUGHPUT,
    LlmFigure,
    headline,
    lead_figures,
    per_request,
)
from scheduler.results.outputdiff import Outputs, fed_alike, output_diffs, with_output_diffs
from scheduler.results.prices import Costs, Price, costs_of, price_of
from scheduler.results.report import (
    NO_DEVICE,
    LatencyMatrix,
    MatrixCell,
    ReportEntry,
    decimals_for,
    device_label,
    entries_of,
    entry_of,
    job_index_of,
    latency_matrices,
    shown,
)
from scheduler.results.rows import (
    Figure,
    failure_row,
    result_row,
    seed_figures,
    shown_figures,
    to_csv,
)
from scheduler.results.significance import mann_whitney
from scheduler.results.sustainrows import sustain_columns
from scheduler.results.typed import TaskResult, ended, measured, row_of
from scheduler.results.verifygroups import (
    AgreedChange,
    GroupVerification,
    ReplicaFigure,
    agreed_changes,
    short_peer,
    verification_groups,
)
from scheduler.results.verifyrows import class_name, verification_counts, verification_line, verify_columns

__all__ = [
    "BY_NAME",
    "CAPACITY_COLUMNS",
    "COLUMNS",
    "COST_COLUMNS",
    "COST_FIGURES",
    "CSV_COLUMNS",
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD_PCT",
    "E2E",
    "ENERGY_COLUMNS",
    "EXTENDED_COLUMNS",
    "FLEET_COLUMNS",
    "GENERATION_COLUMNS",
    "LLM_FIGURES",
    "NO_DEVICE",
    "RANKS",
    "REFERENCE_COLUMNS",
    "RUNTIME_RATES",
    "SEED_COLUMNS",
    "SUSTAIN_COLUMNS",
    "THROUGHPUT",
    "AgreedChange",
    "CampaignReport",
    "Column",
    "CostFigure",
    "CostLine",
    "Costs",
    "DiffRow",
    "Figure",
    "GroupVerification",
    "LatencyMatrix",
    "LlmFigure",
    "MatrixCell",
    "Member",
    "Merged",
    "Outputs",
    "Price",
    "ReplicaFigure",
    "ReportEntry",
    "ReportTask",
    "ResultsFileError",
    "Section",
    "Signed",
    "TaskResult",
    "agreed_changes",
    "capacity_columns",
    "cell",
    "cells",
    "class_name",
    "column_formulas",
    "compare",
    "cost_columns",
    "cost_lines",
    "costs_of",
    "decimals_for",
    "device_label",
    "diff_entries",
    "ended",
    "energy_columns",
    "entries_of",
    "entry_of",
    "failure_row",
    "fed_alike",
    "figures_of",
    "flag",
    "fleet_columns",
    "fleet_rows",
    "generation_columns",
    "headline",
    "job_index_of",
    "latency_matrices",
    "lead_figures",
    "level_rows",
    "mann_whitney",
    "match_entries",
    "measured",
    "member_row",
    "merged_row",
    "merged_stats",
    "names",
    "output_diffs",
    "per_request",
    "price_of",
    "price_text",
    "priced",
    "result_row",
    "row_of",
    "seed_figures",
    "short_peer",
    "shown",
    "shown_figures",
    "sustain_columns",
    "to_csv",
    "verification_counts",
    "verification_groups",
    "verification_line",
    "verify_columns",
    "with_output_diffs",
]
