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
    peakrows     a peaks task's columns (its figure, spread, size, library, kernel)
    peakview     the peaks table every view renders: PeakLine per device x figure, peak_lines
    fleetrows    a fleet job's member rows and its merged row, from every member's raw records
    outputdiff   OutputMaxDiff: rows of one model compared on their outputs, against the first row
    speedup      SpeedupVsCpu: a device's row against its baseline CPU row (its runtime's CPU, else
                 CPU (ONNX)) of the same model and inputs, with the spread from both rows' quartiles
    verifyrows   Verified, DeviceClass, Claim: how a replica group settled a row, the peer's claim mark;
                 verification_counts: verified / unverifiable / outliers, submit's last line
    verifygroups each replica group's verification (GroupVerification: the agreed figure, the band, the
                 replicas' figures and networks, the outliers), derived once from the task views;
                 agreed_changes: two campaigns' agreed figures compared (`report --diff`)
    typed        TaskResult: a task's typed value (its derived measurement, or how it ended), row_of
    front        a sweep's throughput-latency front per device or server: each load level's point (with
                 its verification, error share and cost), the points no other beats marked
    frontrank    the campaign's rank: applied to each swept length's groups: Standing per device or
                 server (verified before unchecked, ties shared, unranked with why), Ranking
    document     CampaignReport: results.json as one typed value (built once, or read once from a file);
                 every medium renders it
    report       a campaign report as data: entries, the device x unit matrix
    bundle       bundle.json: each row's signed result, the peers as placed, the groups with their band
                 and class spread, the campaign file; canonical JSON and the digests the seal names
    proof        a bundle checked by anyone, offline (`sark-node verify`): the seal, every signature,
                 every figure derived again bit for bit, every group's agreement recomputed
    mergeproof   the rows no single signed result holds, derived again for `verify`: a fleet's merged row
                 from its members' signed records, a capacity search's level rows from its signed levels
    board        the board's rows (`sark-node board`): verified groups and single tasks of many campaigns
    imported     ImportedRow, Figure, Unreadable: another tool's results as unverified rows; bounded JSON
    toolformats  GuideLLM's, AIPerf's, vLLM bench serve's, llama-bench's JSON as ImportedRows (`import`)
    aiperfrecords  a campaign's per-request records as JSONL in AIPerf's record layout (`--format aiperf`)
    diff         two campaigns compared: tasks paired by worker, then device; each change tested
    significance the Mann-Whitney U test the diffs use
    prices       the one seam where a row's price is chosen and bounded (campaign, then owner); Costs
    costview     COST_FIGURES ($ / 1k inferences, $ / M tokens, per joule), cost_lines ranked, price_text
    costrows     priced (a TaskResult with its Price) and the cost columns' cells
    llmview      LLM_FIGURES: TTFT, TPOT, ITL, decode tok/s, ROUGE-L, each with its formula (the LLM views);
                 RUNTIME_RATES: a runtime's own pp and tg rates, shown where a run has them

Fleet rows
----------

`outputs.campaign_rows` adds the fleet columns to member rows and one merged `Endpoint (fleet)` row per
fleet job (`scheduler/results/fleetrows.py`), derived from the raw records of the members whose results
passed both checks, so it counts only verified, dealt requests; a member without a result is named in
`FleetLost` and `Detail` with its cause, and its records are not there (none reached the submitter, or they
were refused); so is a member whose quickest first token is under half the other members' (`fleetrows.apart`).

The room, and how a result travels
----------------------------------

The results room is `scheduler/results/`, a subpackage rather than a new top-level package: what it does is
pure (rows and files as values, no I/O), it builds on `scheduler`'s own values (`TaskView`, `Status`,
`Campaign`, the fleet schedule's lag and rate), and inside `scheduler` it stays under the purity test
(`tests/unit/repository/test_layers.py` scans `scheduler/` recursively); the design card's top level
(protocol, scheduler, drivers, node, gate) stays as it is. `scheduler/results/columns.py` is the one
registry of output columns: a `Column` (name, section, unit, form, formula key) for every column, in the
files' order: the seed columns, the reference ones, the extended ones (percentiles, CV, process medians,
stability, CPU/GPU, providers, fallback, sha256, runtimes, worker, signature, Verified, DeviceClass, Claim
(`results/verifyrows.py`; `scheduler.verification`, "How a replicated task is verified"), InputShapes,
InputsDefaulted, FailureReason, FailureStage, Detail), a generate task's, a capacity search's, energy,
fleet, sustained runs and telemetry, and cost (PricePerHour, PriceSource, CostPer1kInferences,
CostPerMTokens, InferencesPerJoule, TokensPerJoule). `CSV_COLUMNS` (results.csv's header, results.json's
`columns`), the section tuples and results.json's `formulas` are derived from it, and every row module of
the room (`rows`, `genrows`, `caprows`, `energyrows`, `sustainrows`, `fleetrows`, `costrows`) writes its
cells with `cell(name, value)` by the column's form: one boolean spelling, `True`/`False`, `""` for a value
that does not apply. No module outside the room defines a column (`tests/unit/repository/test_columns.py`: a
dict key, a call keyword, or two or more names in one tuple, list or set).

How a result travels (every arrow forward: no dict is parsed back, no file is read back):

    measuring child -> the worker's derived Measurement, signed -> stream
      -> attempt.py: schema, signature -> verdict.judge: check_figures + check_sends -> derived Measurement
      -> store: ResultRecord(envelope = the worker's signed bytes, samples, derived = the derived
         Measurement packed, received); an offer spec with a schedule (a fleet deal, an open loop's seed)
         kept when it goes out
      -> outputs.task_results: one scheduler.TaskResult per task (results.typed), built once: the envelope's
         body with the derived measurement, or the task's ending (Scheduler snapshot)
      -> results.priced: the task's Price, chosen and bounded at the one seam (results/prices.price_of: the
         campaign's `prices:` for its peer, then its class; else the owner's word from the advert it was
         placed by and the result's signed device, refused outside 0..10000 or not finite, the higher of two
         that differ), kept on the TaskResult and the ReportTask (results.json's `price`)
      -> rows rendered from it (results.row_of, by the registry; costrows.cost_columns) + capacity level
         rows + fleet rows (members' raw records; the merged row's figures kept typed beside it)
      -> outputs.campaign_report: one results.CampaignReport (results/document.py), built once: per task its
         row, samples, `signed` (the worker, its device, the derived measurement: typed) and a fleet merged
         row's `merged` e2e figures; `swarm`, the gates it last ran through or ("embedded",), as the store's
         claim recorded it (report.html's provenance names it)
           -> results.csv (to_csv of its rows) · results.json (CampaignReport.to_json)
           -> report.html (node/report/render) · the submit summary (run.Outcome.report, the same value) ·
              each replica group's verification (`verification`: results/verifygroups, from the tasks) ·
              report --format md · terminal tables · report --diff: results.entries_of(report), every figure
              from `signed.measurement` (or `merged`), never from a cell; each entry's Costs from its
              measurement and its `price` (results.costs_of); costview.cost_lines ranks them for
              node/report/costreport (html, md, terminal) and the LLM view; diff adds their rows
      -> REST API /api/jobs/{id}: shapes.job_results over the campaign's rows as campaign_rows renders them
         (the files' row, Verified and QuorumNetworks included): shapes.result(ReportTask.of(row,
         TaskResult)), the seed figures and `figures` (results.shown_figures) typed from the derived
         measurement -> dashboard.html draws `figures`, no cell turned to a number, with the row's Verified:
         a replicated figure marked ✓k/n, a refused one's verdict in its place, a device's other tasks in a
         column named (`tests/labs/views/test_dashboard_verified.py`)
    results.json on disk (`report PATH`, `report --diff A B`) -> CampaignReport.from_json, once per file (a
      ResultsFileError naming the file and each field otherwise) -> the same renderers as above

Every renderer (the public functions of `node/report/` and `node/http/shapes.py`) takes the `CampaignReport`
or a typed part of it, never a `Mapping` (`tests/unit/repository/test_renderers_typed.py`); none validates a
document again. `CampaignReport.to_json` writes the golden files byte for byte, and a golden results.json
read and written again is unchanged (`tests/unit/scheduler/results/test_document.py`).

No figure is parsed back from a row's text on the submitter's side: `scheduler/results/report.entry_of`
takes who and what (task, status, model, unit, device, worker, ending) from the row and every number from
the typed value, and a row without one has no figures; report.html's generation lead and the submit summary
take stability and defaulted inputs from the measurement too (`tests/unit/scheduler/results/test_report.py`
feeds rows whose numeric cells are garbage or lies beside a valid measurement;
`tests/unit/node/submitter/test_store.py` spoils every numeric and flag cell of each golden campaign's
results.json and gets the same entries and Markdown, and pins that the typed figures the API gives are the
row's cells before formatting). The store keeps no rendered text: a result is its envelope, its samples, the
derived measurement and when it was received (`node/submitter/store.py`).

Two decisions. (1) The derived measurement is stored beside the envelope, not derived again at every write:
`protocol.derive` is pure and bit-exact for an honest result, but on the largest results it is slow for what
runs on every dashboard refresh and every `report` (`benchmarks/stored_derived.py`, the wire's limits, this
shared 2-core machine: derive 58 ms for a tensor task at `MAX_SAMPLES` = 262,144 samples and 385 ms for a
generate task at `MAX_RECORDS` = 5,000 requests of 64 tokens with ROUGE, against 8 ms and 64 ms to unpack
the stored derived measurement, 6-7x; an earlier run under more load: 102 and 588 ms against 21 and 86),
while storing it costs its packed size once (2.4 MB and 5.1 MB for those two, about the envelope's own), a
campaign of many such results paying that per result on every write otherwise. (2) Old campaigns still open:
a store written before the derived measurement was kept gets the `derived` column on open (`ALTER TABLE`);
its results, which carry a text row, are rebuilt from their envelopes with the measurement derived again (in
the packed form a kept one has, so the files come out byte for byte; the old row's text is read for nothing
but its `CreatedUtc`), and a task with no stored result (failed, unschedulable, cancelled) is rebuilt from
its ending, which the scheduler snapshot holds (`tests/unit/node/submitter/test_store.py` opens such a store
and writes the golden files). A results.json file read from disk (`report PATH`, `report --diff A B`) shows
the figures of its `signed` measurements; one written before results.json carried them shows its tasks
without figures rather than numbers read back from its cells (`CampaignReport.from_json`; its `campaign`
must still validate as a `Campaign`, else the file is refused with each field named, exit 2).

What the files and the views show
---------------------------------

`results.json` keeps raw samples, the signed measurement and `formulas` (each computed generation column's
formula: each registry column's `formula` key over `FORMULAS`, in column order; the measurement policy
columns TokenSource, TokensPerChunkMean, UsageVsCountedTokens, TtfoMsMedian, ReasoningTokensMean and
DatasetSeed are derived from the records like every other figure); `report.html` (no network) shows the
matrix (each cell the median with p90, p99, max and n of the same sample, rounded by `results.decimals_for`
to what the median's standard error supports, 0 to 3 decimals; a model server's cell its E2E; a Failed or
Unschedulable cell its reason, which the terminal gives under the table; a device that ran several tasks in
one column shows its completed one and names the others, `MatrixCell.also`, `node/report/matrix.py`),
performance per dollar and per watt (`node/report/costreport.py`), the swarm and each task's provenance
(worker, signature, Verified, quorum networks, device class, claim: `node/report/provenance.py`), a heatmap
beside its matrix when there is something to compare, then pictures (`node/report/plots.py`) of the figures
that stand only (an outlier's or a fallback's samples are drawn nowhere; the stability table gives its
verdict): distributions, resources (process peak memory; a model server's rows, which have none, a line
saying why), per-process medians as % from the row's figure (rows of two processes or more), generation
sections, each task's telemetry over time and a sustained run's windows (`node/report/telereport.py`),
`Throttled` and its causes in the row (`scheduler/results/sustainrows.py`), in the diff's notes and on the
dashboard (the diff's notes also say how each side's figure was verified where its campaign asked, and a
refused side's verdict); `tests/labs/views/test_report_screens.py` (`-m chromium`) renders a tensor, an LLM,
an endpoint and a verified campaign at 1280 px, screenshots and prints each, and fails on an empty or broken
page or one wider than the window; `tests/labs/views/test_report_layout.py` measures label and legend
overlaps in Chromium (legends against labels too, on examples/llm.yaml's own results.json,
`tests/golden/reports/llm_results.json`). A generate task's views lead with `scheduler/results/llmview.py`'s
`LLM_FIGURES` (TTFT ms, TPOT ms, ITL ms p99, decode tok/s, ROUGE-L, each label with its formula):
report.html's and `report --format md`'s first table, the vertical table `submit` ends with (a figure a
line: it reads at 80 columns), the dashboard's generation table (same labels, pinned by
`tests/labs/views/test_dashboard_llm.py`) and `report --diff`, which tests each figure on its per-request
values (Mann-Whitney; decode tok/s and ROUGE-L better upwards) before the end-to-end latency, one small
table per device and unit. `scheduler/results/diff.py` pairs the two campaigns' tasks per (unit, job) by the
worker's peer id first, then device fingerprint and name, the fingerprint alone, the name alone (each only
where it picks one task a side): identical boards with one hostname pair by id, and a device shared by
several workers is labelled with the end of each worker's id (`report.device_label`). Terminal output goes
through `node/cli/console.py`: on a terminal rich lays tables out at its width; to a pipe or a file (no
exported `COLUMNS`) the width is unbounded and soft-wrapped, so no path, footnote or summary line is broken
with a newline. `peers` and `status` show a peer id by its end (`…Xy7Qp2`; `peers` whole ids from 150
columns, `--json` always whole): every id starts `12D3KooW`. A generation's stability verdict
(`protocol.aggregate.per_token_instability`) applies the same bounds to its requests' TPOT instead of their
end-to-end times, which vary with each answer's length; its reasons say "TPOT". Rows rebuilt later keep the
time each task ended.

No stored value stops an output
-------------------------------

No stored value stops an output. `outputs.write_files` writes results.csv and results.json first, then
report.html, all three from the one `CampaignReport` (none read back). Every picture of the report
(`render`, `genreport`, `endreport`, `telereport`) passes one seam, `node/report/pictures.drawn(name,
draw)`: the picture, or in its `<figure>` a note naming it and the error's class and message (`for_html`);
values a picture cannot place (not finite, beyond ±1e15, or not positive on a log axis) are left out of it
and counted in its caption, so the issue's ±1e308 W/°C/MHz telemetry draws with a caption; a page that
cannot be built at all is a report.html that says why (`render_html` never raises). `report ID` re-renders
through the same functions, from a `CampaignReport` built from the store, html into the campaign's own
folder (beside results.csv). The terminal tables, Markdown, CSV, JSON, the diff and the dashboard's JSON
take any float: the API answers strict JSON (`http/shapes.ApiJson`: NaN and infinities as null; a
heartbeat's NaN median had made every campaign listing a 500), while results.json keeps Python's
`NaN`/`Infinity` (faithful; verification keeps them out of a stored result). Pinned by
`tests/unit/node/report/test_total_renderers.py` (hypothesis: two stored campaigns with their numbers drawn
across the whole float range, into every renderer), `tests/labs/views/test_serve_outputs.py` and
`tests/labs/e2e/test_absurd_telemetry.py` (a real `join` sending ±1e308 telemetry, self-consistent, beside
an honest one, under `submit`, `report` and `serve`).
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
    PEAK_COLUMNS,
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
    apart,
    fleet_columns,
    fleet_rows,
    member_row,
    merged_row,
    merged_stats,
)
from scheduler.results.front import Front, FrontPoint, fronts_of, groups_of
from scheduler.results.frontrank import Ranking, Standing, ranking_of
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
from scheduler.results.peakrows import peak_columns
from scheduler.results.peakview import PeakLine, is_peak_task, peak_jobs, peak_lines
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
    short_task,
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
from scheduler.results.speedup import (
    REFERENCE_CPU,
    Timed,
    baseline,
    speedup_cell,
    speedups,
    timed_of,
    with_speedups,
)
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
    "PEAK_COLUMNS",
    "RANKS",
    "REFERENCE_COLUMNS",
    "REFERENCE_CPU",
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
    "Front",
    "FrontPoint",
    "GroupVerification",
    "LatencyMatrix",
    "LlmFigure",
    "MatrixCell",
    "Member",
    "Merged",
    "Outputs",
    "PeakLine",
    "Price",
    "Ranking",
    "ReplicaFigure",
    "ReportEntry",
    "ReportTask",
    "ResultsFileError",
    "Section",
    "Signed",
    "Standing",
    "TaskResult",
    "Timed",
    "agreed_changes",
    "apart",
    "baseline",
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
    "fronts_of",
    "generation_columns",
    "groups_of",
    "headline",
    "is_peak_task",
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
    "peak_columns",
    "peak_jobs",
    "peak_lines",
    "per_request",
    "price_of",
    "price_text",
    "priced",
    "ranking_of",
    "result_row",
    "row_of",
    "seed_figures",
    "short_peer",
    "short_task",
    "shown",
    "shown_figures",
    "speedup_cell",
    "speedups",
    "sustain_columns",
    "timed_of",
    "to_csv",
    "verification_counts",
    "verification_groups",
    "verification_line",
    "verify_columns",
    "with_output_diffs",
    "with_speedups",
]
