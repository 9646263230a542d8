"""The figures an LLM engineer reads first, each under one label that names its formula.

TTFT, TPOT, ITL, decode tok/s and ROUGE-L, in this order and under these labels, lead report.html,
`report --format md`, the table at the end of `submit` and `report --diff` for a generate task (the
dashboard shows the same five, named the same). The per-request values are what a diff tests; the
headline is the figure a row shows. Pure: every value is read from a `GenerationStats` and its raw
request records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol import GenerationStats
from protocol.genstats import gaps_ms, tpot_ms


@dataclass(frozen=True)
class LlmFigure:
    """One LLM figure: its key, its short label, the formula the label stands for, and which way is better."""

    key: str
    label: str
    formula: str
    higher_is_better: bool = False

    @property
    def titled(self) -> str:
        """The label with its formula: "TPOT ms = (E2E - TTFT) / (output tokens - 1), median"."""
        return f"{self.label} = {self.formula}"


LLM_FIGURES: Final = (
    LlmFigure("ttft", "TTFT ms", "request sent -> first output token, median"),
    LlmFigure("tpot", "TPOT ms", "(E2E - TTFT) / (output tokens - 1), median"),
    LlmFigure("itl", "ITL ms p99", "gap between consecutive tokens, all requests pooled, p99"),
    LlmFigure("decode", "decode tok/s", "(output tokens - 1) / (E2E - TTFT), median", higher_is_better=True),
    LlmFigure("rouge_l", "ROUGE-L", "F1 against the reference, mean over requests", higher_is_better=True),
)
"""The lead figures of a generate task, in the order every view shows them."""

E2E: Final = LlmFigure("e2e", "E2E ms", "request sent -> last output token, median")
THROUGHPUT: Final = LlmFigure(
    "output_tok_per_s", "output tok/s", "all output tokens / wall time of the run", higher_is_better=True
)
RUNTIME_RATES: Final = (
    LlmFigure(
        "runtime_pp",
        "runtime pp tok/s",
        "prompt tokens / prompt processing time, the runtime's own timer (llama-bench's pp)",
        higher_is_better=True,
    ),
    LlmFigure(
        "runtime_tg",
        "runtime tg tok/s",
        "generated tokens / generation time, the runtime's own timer (llama-bench's tg)",
        higher_is_better=True,
    ),
)
"""A runtime's own rates beside the harness's figures, where it keeps timers (llama.cpp): shown only for
the runs that have them."""


def lead_figures(runs: Sequence[GenerationStats | None]) -> tuple[LlmFigure, ...]:
    """The figures a lead table shows for these runs: the LLM figures, E2E and output tok/s, and the
    runtime's own rates where any run has them."""
    timed = any(s is not None and s.runtime_rates is not None for s in runs)
    return (*LLM_FIGURES, E2E, THROUGHPUT, *(RUNTIME_RATES if timed else ()))


def headline(stats: GenerationStats | None, figure: LlmFigure) -> float | None:
    """The figure a row shows (None: not a generate task, ROUGE not asked for, or no successful request
    gave the figure: shown empty, never 0)."""
    if stats is None:
        return None
    samples = {"ttft": stats.ttft_ms, "tpot": stats.tpot_ms, "itl": stats.itl_ms, "e2e": stats.e2e_ms}
    if figure.key in samples:
        sample = samples[figure.key]
        # ITL's p99: the stalls a reader feels; its median is close to TPOT's
        return (sample.p99 if figure.key == "itl" else sample.median) if sample.n else None
    if figure.key == "rouge_l":
        return stats.rouge.rouge_l if stats.rouge is not None else None
    if stats.requests <= stats.errors:
        return None
    if figure.key in ("runtime_pp", "runtime_tg"):
        if (timers := stats.runtime_rates) is None:
            return None
        return timers.pp_tok_per_s() if figure.key == "runtime_pp" else timers.tg_tok_per_s()
    return stats.decode_tok_per_s if figure.key == "decode" else stats.output_tok_per_s


def per_request(stats: GenerationStats | None, figure: LlmFigure) -> tuple[float, ...]:
    """The raw values behind a figure, for a test between two runs (empty: no per-request values kept)."""
    if stats is None:
        return ()
    ok = [r for r in stats.records if r.error is None]
    if figure.key == "ttft":
        return tuple(r.ttft_ms for r in ok if r.ttft_ms is not None)
    if figure.key == "tpot":
        return tuple(t for r in ok if (t := tpot_ms(r)) is not None)
    if figure.key == "itl":
        return tuple(g for r in ok for g in gaps_ms(r))
    if figure.key == "decode":
        return tuple(1000.0 / t for r in ok if (t := tpot_ms(r)) is not None and t > 0)
    if figure.key == "e2e":
        return tuple(r.e2e_ms for r in ok)
    return ()
