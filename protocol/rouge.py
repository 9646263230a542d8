"""ROUGE-1, ROUGE-2 and ROUGE-L F1 between a generated text and its reference, with no external package.

Tokens as `rouge-score` makes them by default: lower-cased, every run of characters other than a-z
and 0-9 is a separator (no stemming). ROUGE-N counts clipped n-gram overlaps; ROUGE-L uses the longest
common subsequence of the two token lists. F1 is 2PR / (P + R), and 0 when either side is empty.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_SEPARATOR: Final = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class RougeScore:
    """The three F1 scores of one output against one reference (0..1)."""

    rouge1: float
    rouge2: float
    rouge_l: float


def tokens(text: str) -> list[str]:
    """The text lower-cased and split on every run of characters other than a-z and 0-9."""
    return [t for t in _SEPARATOR.split(text.lower()) if t]


def _f1(overlap: int, produced: int, wanted: int) -> float:
    if overlap == 0 or produced == 0 or wanted == 0:
        return 0.0
    precision, recall = overlap / produced, overlap / wanted
    return 2 * precision * recall / (precision + recall)


def rouge_n(output: Sequence[str], reference: Sequence[str], n: int) -> float:
    """ROUGE-N F1: clipped n-gram overlap between two token lists."""
    got = Counter(tuple(output[i : i + n]) for i in range(len(output) - n + 1))
    want = Counter(tuple(reference[i : i + n]) for i in range(len(reference) - n + 1))
    overlap = sum((got & want).values())
    return _f1(overlap, sum(got.values()), sum(want.values()))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest common subsequence of two token lists (two rows of the table)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def score(output: str, reference: str) -> RougeScore:
    """ROUGE-1/2/L F1 of one output against one reference."""
    got, want = tokens(output), tokens(reference)
    return RougeScore(
        rouge1=rouge_n(got, want, 1),
        rouge2=rouge_n(got, want, 2),
        rouge_l=_f1(lcs_length(got, want), len(got), len(want)),
    )
