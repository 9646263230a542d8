"""The cells of a generate task's columns: latencies, throughput, quality, the measurement policy.

The columns and their formulas (`protocol.FORMULAS`, kept in results.json beside the numbers, with
every raw request record) are the registry's (`scheduler.results.columns`); a tensor task leaves
these columns empty.
"""

from __future__ import annotations

from protocol import GenerationStats
from scheduler.results.columns import cell, cells


def generation_columns(stats: GenerationStats | None) -> dict[str, str]:
    """The generate columns of a measurement ({} for a tensor task: they stay empty)."""
    if stats is None:
        return {}
    rouge = stats.rouge
    return {
        "TtftMsMedian": cell("TtftMsMedian", stats.ttft_ms.median),
        "TtftMsP90": cell("TtftMsP90", stats.ttft_ms.p90),
        "TpotMsMedian": cell("TpotMsMedian", stats.tpot_ms.median),
        "TpotMsP90": cell("TpotMsP90", stats.tpot_ms.p90),
        "ItlMsP99": cell("ItlMsP99", stats.itl_ms.p99),
        "E2eMsMedian": cell("E2eMsMedian", stats.e2e_ms.median),
        "PrefillTokPerS": cell("PrefillTokPerS", stats.prefill_tok_per_s),
        "DecodeTokPerS": cell("DecodeTokPerS", stats.decode_tok_per_s),
        "OutputTokensMean": cell("OutputTokensMean", stats.output_tokens_mean),
        "Rouge1": "" if rouge is None else cell("Rouge1", rouge.rouge1),
        "Rouge2": "" if rouge is None else cell("Rouge2", rouge.rouge2),
        "RougeL": "" if rouge is None else cell("RougeL", rouge.rouge_l),
        "Concurrency": "" if stats.request_rate is not None else cell("Concurrency", stats.concurrency),
        "RequestRate": cell("RequestRate", stats.request_rate),
        "TtftMsP99": cell("TtftMsP99", stats.ttft_ms.p99),
        "TpotMsP99": cell("TpotMsP99", stats.tpot_ms.p99),
        "RequestPerS": cell("RequestPerS", stats.request_per_s),
        "OutputTokPerS": cell("OutputTokPerS", stats.output_tok_per_s),
        "Goodput": cell("Goodput", stats.goodput),
        "Requests": cell("Requests", stats.requests),
        "Errors": cell("Errors", stats.errors),
        "ErrorsByKind": cells("ErrorsByKind", (f"{k}={n}" for k, n in sorted(stats.errors_by_kind.items()))),
        "TokensCounted": cell("TokensCounted", stats.tokens_counted),
        "RttMs": cell("RttMs", stats.rtt_ms),
        "TlsMs": cell("TlsMs", stats.tls_ms),
        "TokenSource": stats.token_source,
        "TokensPerChunkMean": cell("TokensPerChunkMean", stats.tokens_per_chunk_mean),
        "UsageVsCountedTokens": cell("UsageVsCountedTokens", stats.usage_vs_counted_pct),
        "TtfoMsMedian": "" if stats.ttfo_ms is None else cell("TtfoMsMedian", stats.ttfo_ms.median),
        "ReasoningTokensMean": cell("ReasoningTokensMean", stats.reasoning_tokens_mean),
        "DatasetSeed": cell("DatasetSeed", stats.dataset_seed),
        **client_columns(stats),
    }


def client_columns(stats: GenerationStats) -> dict[str, str]:
    """Whether the load client held its schedule: asked (`RequestRate`) against achieved send rate,
    send lag, the client's CPU, and the verdict with its reason. Empty for a run with no client
    readings (a white-box generate task)."""
    if stats.client_cpu_pct is None and stats.schedule_lag_ms_p99 is None:
        return {}
    return {
        "RequestRateAchieved": cell("RequestRateAchieved", stats.request_rate_achieved),
        "ScheduleLagMsP50": cell("ScheduleLagMsP50", stats.schedule_lag_ms_p50),
        "ScheduleLagMsP99": cell("ScheduleLagMsP99", stats.schedule_lag_ms_p99),
        "ClientCpuMaxPct": cell("ClientCpuMaxPct", stats.client_cpu_pct),
        "Unsent": cell("Unsent", stats.unsent),
        "ClientSaturated": cell("ClientSaturated", stats.client_saturated),
        "ClientSaturatedReason": stats.client_saturated_reason,
    }
