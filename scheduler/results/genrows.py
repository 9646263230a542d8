"""The cells of a generate task's columns: latencies, throughput, quality, the measurement policy.

The columns and their formulas (`protocol.FORMULAS`, kept in results.json beside the numbers, with
every raw request record) are the registry's (`scheduler.results.columns`); a tensor task leaves
these columns empty.
"""

from __future__ import annotations

from protocol import GenerationStats, Stats
from protocol.sessions import ttft_by_turn_text
from scheduler.results.columns import cell, cells


def generation_columns(stats: GenerationStats | None) -> dict[str, str]:
    """The generate columns of a measurement ({} for a tensor task: they stay empty). A figure over
    the successful requests is empty when none succeeded (never 0), and the error share sits beside."""
    if stats is None:
        return {}
    rouge = stats.rouge
    return {
        **latency_columns(stats),
        **rate_columns(stats),
        "Rouge1": "" if rouge is None else cell("Rouge1", rouge.rouge1),
        "Rouge2": "" if rouge is None else cell("Rouge2", rouge.rouge2),
        "RougeL": "" if rouge is None else cell("RougeL", rouge.rouge_l),
        "Concurrency": "" if stats.request_rate is not None else cell("Concurrency", stats.concurrency),
        "RequestRate": cell("RequestRate", stats.request_rate),
        "Goodput": cell("Goodput", stats.goodput),
        "Requests": cell("Requests", stats.requests),
        "RequestsSent": cell("RequestsSent", stats.requests_sent),
        "Errors": cell("Errors", stats.errors),
        "ErrorShare": cell("ErrorShare", stats.errors / stats.requests) if stats.requests else "",
        "ErrorsByKind": cells("ErrorsByKind", (f"{k}={n}" for k, n in sorted(stats.errors_by_kind.items()))),
        "TokensCounted": cell("TokensCounted", stats.tokens_counted),
        "RttMs": cell("RttMs", stats.rtt_ms),
        "TlsMs": cell("TlsMs", stats.tls_ms),
        "TokenSource": stats.token_source,
        "TokensPerChunkMean": cell("TokensPerChunkMean", stats.tokens_per_chunk_mean),
        "UsageVsCountedTokens": cell("UsageVsCountedTokens", stats.usage_vs_counted_pct),
        "TtfoMsMedian": "" if stats.ttfo_ms is None else stat_cell("TtfoMsMedian", stats.ttfo_ms, "median"),
        "DatasetSeed": cell("DatasetSeed", stats.dataset_seed),
        **client_columns(stats),
        **session_columns(stats),
    }


def session_columns(stats: GenerationStats) -> dict[str, str]:
    """A session run's figures (`protocol.sessions`): TTFT median by turn index (`1:120.3 2:45.1`),
    and its sessions' count, completions, turns, duration and tokens. Empty without sessions."""
    s = stats.sessions
    if s is None:
        return {}
    return {
        "TtftMsByTurn": ttft_by_turn_text(stats.by_turn),
        "Sessions": cell("Sessions", s.sessions),
        "SessionsCompleted": cell("SessionsCompleted", s.completed),
        "SessionTurnsMean": cell("SessionTurnsMean", s.turns_mean),
        "SessionDurationSMedian": stat_cell("SessionDurationSMedian", s.duration_s, "median"),
        "SessionPromptTokensMean": cell("SessionPromptTokensMean", s.prompt_tokens_mean),
        "SessionOutputTokensMean": cell("SessionOutputTokensMean", s.output_tokens_mean),
    }


def latency_columns(stats: GenerationStats) -> dict[str, str]:
    """The per-request time figures, each empty when no successful request gave one."""
    return {
        "TtftMsMedian": stat_cell("TtftMsMedian", stats.ttft_ms, "median"),
        "TtftMsP90": stat_cell("TtftMsP90", stats.ttft_ms, "p90"),
        "TtftMsP99": stat_cell("TtftMsP99", stats.ttft_ms, "p99"),
        "TpotMsMedian": stat_cell("TpotMsMedian", stats.tpot_ms, "median"),
        "TpotMsP90": stat_cell("TpotMsP90", stats.tpot_ms, "p90"),
        "TpotMsP99": stat_cell("TpotMsP99", stats.tpot_ms, "p99"),
        "ItlMsP99": stat_cell("ItlMsP99", stats.itl_ms, "p99"),
        "E2eMsMedian": stat_cell("E2eMsMedian", stats.e2e_ms, "median"),
    }


def rate_columns(stats: GenerationStats) -> dict[str, str]:
    """The throughput and token figures over the successful requests: all empty when none succeeded."""
    figures: dict[str, float | None] = {
        "PrefillTokPerS": stats.prefill_tok_per_s,
        "DecodeTokPerS": stats.decode_tok_per_s,
        "OutputTokensMean": stats.output_tokens_mean,
        "RequestPerS": stats.request_per_s,
        "OutputTokPerS": stats.output_tok_per_s,
        "ReasoningTokensMean": stats.reasoning_tokens_mean,
    }
    succeeded = stats.requests > stats.errors
    timers = stats.runtime_rates
    if timers is not None:
        figures |= {"RuntimePpTokPerS": timers.pp_tok_per_s(), "RuntimeTgTokPerS": timers.tg_tok_per_s()}
    return {name: cell(name, value) if succeeded else "" for name, value in figures.items()}


def stat_cell(name: str, stats: Stats, part: str) -> str:
    """One part of a sample's statistics ("median", "p99"...) as column `name` writes it; empty for an
    empty sample (no successful request gave one), never 0."""
    value: float = getattr(stats, part)
    return cell(name, value) if stats.n else ""


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
