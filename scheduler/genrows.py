"""The result columns of a generate task, after the existing ones: latencies, throughput, quality.

Their formulas are `protocol.FORMULAS` (results.json keeps them beside the numbers, with every raw
request record); a tensor task leaves these columns empty.
"""

from __future__ import annotations

from typing import Final

from protocol import GenerationStats

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
)


def _ms(value: float) -> str:
    return f"{value:.3f}"


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
    }
