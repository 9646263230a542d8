"""The one registry of output columns: each column's name, section, unit, how it is written, formula.

results.csv's header and results.json's `columns` are `CSV_COLUMNS`, in this order; results.json's
`formulas` are `column_formulas()`; every row-building module of the room writes its cells with
`cell` by the column's `form`. Sections, in order: the seeds' columns, the later reference ones,
the extended ones, a generate task's, a capacity search's, energy, fleet, sustained runs and
telemetry, cost (a row's price and what its results cost: `scheduler.results.prices`), and a peaks
task's figure (`scheduler.results.peakrows`).

Units: Ram and VRam in GB (whole numbers, like the seeds' "16"), FileSize and every other memory
column in MB, times in ms. Lists are joined with ";", booleans are "True"/"False", and a value that
does not apply is "".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from protocol import FORMULAS


class Section(enum.StrEnum):
    """Where a column sits in a row, in the files' order."""

    SEED = "seed"
    REFERENCE = "reference"
    EXTENDED = "extended"
    GENERATION = "generation"
    CAPACITY = "capacity"
    ENERGY = "energy"
    FLEET = "fleet"
    SUSTAIN = "sustain"
    COST = "cost"
    PEAKS = "peaks"


@dataclass(frozen=True)
class Column:
    """One output column.

    Attributes:
        name: its header in results.csv and its key in results.json's rows.
        section: where it sits.
        unit: the unit of its numbers ("" for text, counts and flags).
        form: how a number is written (a `str.format` template); "" for text, flags and lists of text.
        formula: the `protocol.FORMULAS` entry it is computed by ("" when none is listed).
    """

    name: str
    section: Section
    unit: str = ""
    form: str = ""
    formula: str = ""


MS: Final = "{:.3f}"


def _section(section: Section, *columns: tuple[str, ...]) -> tuple[Column, ...]:
    """Columns of one section from (name, unit, form, formula) tuples, the last ones optional."""
    return tuple(Column(c[0], section, *c[1:]) for c in columns)


_SEED = _section(
    Section.SEED,
    ("Status",),
    ("JobId",),
    ("FileName",),
    ("FileSize", "MB", MS),
    ("ComputeUnits",),
    ("DeviceName",),
    ("Soc",),
    ("Ram", "GB", "{:d}"),
    ("DeviceOs",),
    ("LoadMsMedian", "ms", MS),
    ("LoadMsAverage", "ms", MS),
    ("LoadMsStdDev", "ms", MS),
    ("PeakLoadRamUsage", "MB", "{:.1f}"),
    ("InferenceMsMedian", "ms", MS),
    ("InferenceMsAverage", "ms", MS),
    ("InferenceMsStdDev", "ms", MS),
    ("PeakInferenceRamUsage", "MB", "{:.1f}"),
)
_REFERENCE = _section(
    Section.REFERENCE,
    ("CreatedUtc",),
    ("DeviceYear", "", "{:d}"),
    ("DiscreteGpu",),
    ("VRam", "GB", "{:d}"),
    ("DeviceOsVersion",),
    ("LoadMsFirst", "ms", MS),
    ("InferenceMsFirst", "ms", MS),
)
_EXTENDED = _section(
    Section.EXTENDED,
    ("InferenceMsMin", "ms", MS),
    ("InferenceMsMax", "ms", MS),
    ("InferenceMsP90", "ms", MS),
    ("InferenceMsP95", "ms", MS),
    ("InferenceMsP99", "ms", MS),
    ("InferenceCv", "", "{:.4f}"),
    ("InferenceOutliers", "", "{:d}"),
    ("ProcessMedians", "ms", MS),
    ("ProcessSpreadPct", "%", "{:.2f}"),
    ("Unstable",),
    ("UnstableReasons",),
    ("WarmupsUsed", "", "{:d}"),
    ("CpuCoresUsed", "cores", "{:.2f}"),
    ("BackgroundCores", "cores", "{:.2f}"),
    ("GpuUtilPct", "%", "{:.1f}"),
    ("GpuMemMb", "MB", "{:.1f}"),
    ("Providers",),
    ("Fallback",),
    ("OutputMaxDiff",),  # against the model's first row on another runtime (results/outputdiff.py)
    ("SpeedupVsCpu",),  # the device's CPU row's median over this row's, with its spread (results/speedup.py)
    ("ModelSha256",),
    ("RuntimeVersions",),
    ("RuntimeSettings",),  # the runtime's own settings as it reported them (OpenVINO: precision, hint...)
    ("ThroughputPerS", "/s", "{:.1f}"),  # the runtime's own requests in flight (Measurement.async_runs)
    ("AsyncRequests", "", "{:d}"),  # how many requests that run kept in flight
    ("WorkerPeerId",),
    ("SignatureStatus",),
    ("Verified",),  # how replicas settled it (scheduler/results/verifyrows.py)
    ("QuorumNetworks",),  # the networks a replicated row's quorum came from
    ("QuorumOwners",),  # and their owners (one owner's devices are one vote: protocol/owner.py)
    ("DeviceClass",),
    ("Claim",),
    ("InputShapes",),
    ("InputsDefaulted",),
    ("Trimmed",),  # what the worker cut to fit one envelope (node/worker/fit.py)
    ("FailureReason",),
    ("FailureStage",),
    ("Detail",),
)
_GENERATION = _section(
    Section.GENERATION,
    ("TtftMsMedian", "ms", MS, "ttft_ms"),
    ("TtftMsP90", "ms", MS, "ttft_ms"),
    ("TpotMsMedian", "ms", MS, "tpot_ms"),
    ("TpotMsP90", "ms", MS, "tpot_ms"),
    ("ItlMsP99", "ms", MS, "itl_ms"),
    ("E2eMsMedian", "ms", MS, "e2e_ms"),
    ("PrefillTokPerS", "tok/s", "{:.2f}", "prefill_tok_per_s"),
    ("DecodeTokPerS", "tok/s", "{:.2f}", "decode_tok_per_s"),
    # a white-box runtime's own timers beside the harness's (llama.cpp: llama-bench's pp and tg)
    ("RuntimePpTokPerS", "tok/s", "{:.2f}", "runtime_pp_tok_per_s"),
    ("RuntimeTgTokPerS", "tok/s", "{:.2f}", "runtime_tg_tok_per_s"),
    ("OutputTokensMean", "tokens", "{:.2f}"),
    ("Rouge1", "", "{:.4f}", "rouge"),
    ("Rouge2", "", "{:.4f}", "rouge"),
    ("RougeL", "", "{:.4f}", "rouge"),
    # load and service figures (model servers: one row per load level and vantage point)
    ("Concurrency", "", "{:d}"),
    ("RequestRate", "req/s", "{:g}"),
    ("TtftMsP99", "ms", MS, "ttft_ms"),
    ("TpotMsP99", "ms", MS, "tpot_ms"),
    ("RequestPerS", "req/s", MS, "request_per_s"),
    ("OutputTokPerS", "tok/s", "{:.2f}", "output_tok_per_s"),
    ("Goodput", "", "{:.4f}", "goodput"),
    ("Requests", "", "{:d}"),
    ("RequestsSent", "", "{:d}", "requests_sent"),
    ("Errors", "", "{:d}"),
    ("ErrorShare", "", "{:.4f}", "error_share"),
    ("ErrorsByKind",),
    ("TokensCounted",),
    ("RttMs", "ms", MS),
    ("TlsMs", "ms", MS),
    # the declared measurement policy (issue 24): how tokens were counted, what TTFT includes
    ("TokenSource", "", "", "token_source"),
    ("TokensPerChunkMean", "tokens", MS, "tokens_per_chunk_mean"),
    ("UsageVsCountedTokens", "%", "{:+.2f}%", "usage_vs_counted_pct"),
    ("TtfoMsMedian", "ms", MS, "ttfo_ms"),
    ("ReasoningTokensMean", "tokens", "{:.2f}", "reasoning_tokens_mean"),
    ("DatasetSeed", "", "{:d}"),
    # whether the load client held its schedule (issue 33; `protocol.clientload`): RequestRateAchieved,
    # ScheduleLagMsP99, ClientCpuMaxPct and ClientSaturated sit with the fleet's columns, filled for
    # every endpoint row
    ("ScheduleLagMsP50", "ms", MS, "schedule_lag_ms"),
    ("Unsent", "", "{:d}"),
    ("ClientSaturatedReason",),
    # multi-turn sessions (issue 51, `protocol.sessions`): TTFT by turn index, each session's figures
    ("TtftMsByTurn", "ms", "", "ttft_ms_by_turn"),
    ("Sessions", "", "{:d}", "sessions"),
    ("SessionsCompleted", "", "{:d}", "sessions_completed"),
    ("SessionTurnsMean", "", "{:.2f}", "session_turns_mean"),
    ("SessionDurationSMedian", "s", MS, "session_duration_s"),
    ("SessionPromptTokensMean", "tokens", "{:.2f}", "session_tokens"),
    ("SessionOutputTokensMean", "tokens", "{:.2f}", "session_tokens"),
)
_CAPACITY = _section(
    Section.CAPACITY,
    ("CapacityRow",),  # "knee" (the task's own row) or "level" (one per level tried)
    ("CapacityBy",),
    ("CapacityKnee", "", "{:g}"),
    ("CapacityFirstFail", "", "{:g}"),
    ("CapacityGoodputPct", "%", "{:g}"),
    ("CapacityFinished",),
    ("LevelPassed",),
    ("LevelEndedEarly",),
)
_ENERGY = _section(
    Section.ENERGY,
    ("EnergyJoulesPerInference", "J", "{:.6g}"),
    ("EnergyJoulesPerToken", "J", "{:.6g}"),
    ("AvgPowerW", "W", "{:.5g}"),
    ("IdlePowerW", "W", "{:.5g}"),
    ("EnergyMethod",),
    ("EnergyNote",),
)
_FLEET = _section(
    Section.FLEET,
    ("FleetSize", "", "{:d}"),
    ("RequestRateAchieved", "req/s", MS, "request_rate_achieved"),
    ("ScheduleLagMsP99", "ms", MS, "schedule_lag_ms"),
    ("ClientCpuMaxPct", "%", "{:.1f}"),
    ("ClientSaturated", "", "", "client_saturated"),
    ("FleetLost",),
)
_SUSTAIN = _section(
    Section.SUSTAIN,
    ("Throttled",),
    ("ThrottleCauses",),
    ("ThrottleDetail",),
    ("WindowMediansMs", "ms", MS),
    ("TelemetryPeriodMs", "ms", "{:g}"),
    ("TelemetryPoints", "", "{:d}"),
)

_COST = _section(
    Section.COST,
    ("PricePerHour", "$/h", "{:.4g}"),
    ("PriceSource",),  # "campaign: peer", "campaign: class cls-…", "owner", or why the owner's was refused
    ("CostPer1kInferences", "$", "{:.4g}", "cost_per_1k_inferences"),
    ("CostPerMTokens", "$", "{:.4g}", "cost_per_m_tokens"),
    ("InferencesPerJoule", "1/J", "{:.4g}", "inferences_per_joule"),
    ("TokensPerJoule", "tok/J", "{:.4g}", "tokens_per_joule"),
)

_PEAKS = _section(
    Section.PEAKS,
    ("PeakPrecision",),  # a peaks task's figure (scheduler.results.peakrows): fp32 ... fp8, read, write, copy
    ("PeakGops", "Gop/s", "{:.4g}", "peak_gops"),  # a matmul's: GFLOPS (int8: GOPS)
    ("PeakGbs", "GB/s", "{:.4g}", "peak_gbs"),  # a memory access's
    ("PeakCv", "", "{:.4f}", "peak_cv"),
    ("PeakSize",),  # the size the figure is from ("n=1024", "256 MiB"), and its threads
    ("PeakSweep",),  # the sizes swept
    ("PeakLibrary",),
    ("PeakKernel",),
    ("PeakMethod",),
    ("PeakCpuMhz", "MHz", "{:.0f}"),
)

COLUMNS: Final = (
    *_SEED,
    *_REFERENCE,
    *_EXTENDED,
    *_GENERATION,
    *_CAPACITY,
    *_ENERGY,
    *_FLEET,
    *_SUSTAIN,
    *_COST,
    *_PEAKS,
)
"""Every output column, in the files' order."""
BY_NAME: Final = {c.name: c for c in COLUMNS}
CSV_COLUMNS: Final = tuple(c.name for c in COLUMNS)


def names(section: Section) -> tuple[str, ...]:
    """The names of one section's columns, in order."""
    return tuple(c.name for c in COLUMNS if c.section == section)


SEED_COLUMNS: Final = names(Section.SEED)
REFERENCE_COLUMNS: Final = names(Section.REFERENCE)
EXTENDED_COLUMNS: Final = names(Section.EXTENDED)
GENERATION_COLUMNS: Final = names(Section.GENERATION)
CAPACITY_COLUMNS: Final = names(Section.CAPACITY)
ENERGY_COLUMNS: Final = names(Section.ENERGY)
FLEET_COLUMNS: Final = names(Section.FLEET)
SUSTAIN_COLUMNS: Final = names(Section.SUSTAIN)
COST_COLUMNS: Final = names(Section.COST)
PEAK_COLUMNS: Final = names(Section.PEAKS)


def column_formulas() -> dict[str, str]:
    """Each column that is a computed figure, with its formula's text (results.json's `formulas`)."""
    return {c.name: FORMULAS[c.formula] for c in COLUMNS if c.formula}


def flag(value: bool) -> str:
    """The one spelling of a boolean cell."""
    return "True" if value else "False"


def cell(name: str, value: float | str | bool | None) -> str:
    """One cell of column `name`: "" for None, a flag, text as it is, or a number by the column's form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return flag(value)
    if isinstance(value, str):
        return value
    return BY_NAME[name].form.format(value)


def cells(name: str, values: Iterable[float | str | None]) -> str:
    """A list cell of column `name`: each value as `cell` writes it, joined with ";"."""
    return ";".join(cell(name, v) for v in values)
