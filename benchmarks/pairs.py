"""Two sides measured in one process, request by request: the harness's request and a bare loop's,
alternating on one loaded model with each pair's order flipped, so that the host's drift over minutes
falls on both sides of every pair. Imported by `llm_fidelity.py --interleaved` and
`llamacpp_timers.py --interleaved` (and their spawned children).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

P = TypeVar("P")
Figures = tuple[float, float]
"""One request's TTFT and TPOT (ms)."""
Pair = tuple[Figures, Figures]
"""The harness's figures and the bare loop's, for one prompt."""


def alternate(
    harness: Callable[[P], Figures], bare: Callable[[P], Figures], prompts: Sequence[P], rounds: int
) -> list[Pair]:
    """One warm-up a side, then each prompt `rounds` times through both sides, the first side flipping
    from one pair to the next."""
    harness(prompts[0])
    bare(prompts[0])
    pairs: list[Pair] = []
    for r in range(rounds):
        for i, prompt in enumerate(prompts):
            if (r * len(prompts) + i) % 2 == 0:
                h, b = harness(prompt), bare(prompt)
            else:
                b, h = bare(prompt), harness(prompt)
            pairs.append((h, b))
    return pairs


def pair_figures(pairs: Sequence[Pair], side: str) -> dict[str, Any]:
    """Each side's median TTFT and TPOT (the harness's named `side`), and the median of the pairs'
    ratios as a difference in % with its interquartile range."""
    figures: dict[str, Any] = {"pairs": len(pairs)}
    for k, name in enumerate(("ttft", "tpot")):
        ratios = [h[k] / b[k] for h, b in pairs]
        figures |= {
            f"{side}_{name}_ms": statistics.median(h[k] for h, _ in pairs),
            f"bare_{name}_ms": statistics.median(b[k] for _, b in pairs),
            f"{name}_diff_pct": 100 * (statistics.median(ratios) - 1),
            f"{name}_diff_pct_iqr": [round(100 * (q - 1), 2) for q in statistics.quantiles(ratios, n=4)[::2]],
        }
    return figures
