"""The result columns of a generate task, after the existing ones: latencies, throughput, quality.

Their formulas are `protocol.FORMULAS` (results.json keeps them beside the numbers, with every raw
request record); a tensor task leaves these columns empty.
"""

from __future__ import annotations

from typing import Final

from protocol import FORMULAS, GenerationStats

GENERATION_COLUMNS: Final = (
    "TtftMsMedian",
    "TtftMsP90",
    "TpotMsMedian",
    "TpotMsP90",
    "ItlMsP99",
    "E2eMsMedian",
    "PrefillTokPerS",
    "DecodeTokPerS",
    "OutputTokensMean",
    "Rouge1",
    "Rouge2",
    "RougeL",
    # load and service figures (model servers: one row per load level and vantage point)
    "Concurrency",
    "RequestRate",
    "TtftMsP99",
    "TpotMsP99",
    "RequestPerS",
    "OutputTokPerS",
    "Goodput",
    "Requests",
    "Errors",
    "ErrorsByKind",
    "TokensCounted",
    "RttMs",
    "TlsMs",
    # the declared measurement policy (issue 24): how tokens were counted, what TTFT includes
    "TokenSource",
    "TokensPerChunkMean",
    "UsageVsCountedTokens",
    "TtfoMsMedian",
    "ReasoningTokensMean",
    "DatasetSeed",
    # whether the load client held its schedule (issue 33; `protocol.clientload`); RequestRateAchieved,
    # ScheduleLagMsP99, ClientCpuMaxPct and ClientSaturated sit with the fleet's columns, filled here
    # for every endpoint row
    "ScheduleLagMsP50",
    "Unsent",
    "ClientSaturatedReason",
)


COLUMN_FORMULAS: Final[dict[str, str]] = {
    "TtftMsMedian": "ttft_ms",
    "TtftMsP90": "ttft_ms",
    "TtftMsP99": "ttft_ms",
    "TpotMsMedian": "tpot_ms",
    "TpotMsP90": "tpot_ms",
    "TpotMsP99": "tpot_ms",
    "ItlMsP99": "itl_ms",
    "E2eMsMedian": "e2e_ms",
    "PrefillTokPerS": "prefill_tok_per_s",
    "DecodeTokPerS": "decode_tok_per_s",
    "OutputTokPerS": "output_tok_per_s",
    "RequestPerS": "request_per_s",
    "Goodput": "goodput",
    "Rouge1": "rouge",
    "Rouge2": "rouge",
    "RougeL": "rouge",
    "TokenSource": "token_source",
    "TokensPerChunkMean": "tokens_per_chunk_mean",
    "UsageVsCountedTokens": "usage_vs_counted_pct",
    "TtfoMsMedian": "ttfo_ms",
    "ReasoningTokensMean": "reasoning_tokens_mean",
    "RequestRateAchieved": "request_rate_achieved",
    "ScheduleLagMsP50": "schedule_lag_ms",
    "ScheduleLagMsP99": "schedule_lag_ms",
    "ClientSaturated": "client_saturated",
}
"""The `FORMULAS` entry each generation column is computed by (results.json lists them by column)."""


def column_formulas() -> dict[str, str]:
    """Each generation column that is a computed figure, with its formula's text."""
    return {column: FORMULAS[key] for column, key in COLUMN_FORMULAS.items()}


def _ms(value: float) -> str:
    return f"{value:.3f}"


def _opt(value: float | None, form: str) -> str:
    return "" if value is None else form.format(value)


def generation_columns(stats: GenerationStats | None) -> dict[str, str]:
    """The generate columns of a measurement ({} for a tensor task: they stay empty)."""
    if stats is None:
        return {}
    rouge = stats.rouge
    return {
        "TtftMsMedian": _ms(stats.ttft_ms.median),
        "TtftMsP90": _ms(stats.ttft_ms.p90),
        "TpotMsMedian": _ms(stats.tpot_ms.median),
        "TpotMsP90": _ms(stats.tpot_ms.p90),
        "ItlMsP99": _ms(stats.itl_ms.p99),
        "E2eMsMedian": _ms(stats.e2e_ms.median),
        "PrefillTokPerS": f"{stats.prefill_tok_per_s:.2f}",
        "DecodeTokPerS": f"{stats.decode_tok_per_s:.2f}",
        "OutputTokensMean": f"{stats.output_tokens_mean:.2f}",
        "Rouge1": "" if rouge is None else f"{rouge.rouge1:.4f}",
        "Rouge2": "" if rouge is None else f"{rouge.rouge2:.4f}",
        "RougeL": "" if rouge is None else f"{rouge.rouge_l:.4f}",
        "Concurrency": "" if stats.request_rate is not None else str(stats.concurrency),
        "RequestRate": "" if stats.request_rate is None else f"{stats.request_rate:g}",
        "TtftMsP99": _ms(stats.ttft_ms.p99),
        "TpotMsP99": _ms(stats.tpot_ms.p99),
        "RequestPerS": f"{stats.request_per_s:.3f}",
        "OutputTokPerS": f"{stats.output_tok_per_s:.2f}",
        "Goodput": "" if stats.goodput is None else f"{stats.goodput:.4f}",
        "Requests": str(stats.requests),
        "Errors": str(stats.errors),
        "ErrorsByKind": ";".join(f"{k}={n}" for k, n in sorted(stats.errors_by_kind.items())),
        "TokensCounted": "true" if stats.tokens_counted else "false",
        "RttMs": "" if stats.rtt_ms is None else _ms(stats.rtt_ms),
        "TlsMs": "" if stats.tls_ms is None else _ms(stats.tls_ms),
        "TokenSource": stats.token_source,
        "TokensPerChunkMean": _opt(stats.tokens_per_chunk_mean, "{:.3f}"),
        "UsageVsCountedTokens": _opt(stats.usage_vs_counted_pct, "{:+.2f}%"),
        "TtfoMsMedian": "" if stats.ttfo_ms is None else _ms(stats.ttfo_ms.median),
        "ReasoningTokensMean": f"{stats.reasoning_tokens_mean:.2f}",
        "DatasetSeed": "" if stats.dataset_seed is None else str(stats.dataset_seed),
        **client_columns(stats),
    }


def client_columns(stats: GenerationStats) -> dict[str, str]:
    """Whether the load client held its schedule: asked (`RequestRate`) against achieved send rate,
    send lag, the client's CPU, and the verdict with its reason. Empty for a run with no client
    readings (a white-box generate task)."""
    if stats.client_cpu_pct is None and stats.schedule_lag_ms_p99 is None:
        return {}
    return {
        "RequestRateAchieved": _opt(stats.request_rate_achieved, "{:.3f}"),
        "ScheduleLagMsP50": _opt(stats.schedule_lag_ms_p50, "{:.3f}"),
        "ScheduleLagMsP99": _opt(stats.schedule_lag_ms_p99, "{:.3f}"),
        "ClientCpuMaxPct": _opt(stats.client_cpu_pct, "{:.1f}"),
        "Unsent": str(stats.unsent),
        "ClientSaturated": "true" if stats.client_saturated else "false",
        "ClientSaturatedReason": stats.client_saturated_reason,
    }
