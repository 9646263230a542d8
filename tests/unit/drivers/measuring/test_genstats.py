"""ROUGE and the generate aggregate, table-driven, against hand-computed figures."""

from __future__ import annotations

import pytest

from protocol import GenerateSpec, Prompt, RequestRecord, Slo, rouge
from protocol.genstats import gaps_ms, summarize_generation, tpot_ms

SPEC = GenerateSpec(
    prompts=(Prompt(id="a", text="x", reference="the cat sat on the mat"), Prompt(id="b", text="y")),
    prompts_sha256="0" * 64,
    quality=("rouge",),
)


@pytest.mark.parametrize(
    ("output", "reference", "r1", "r2", "rl"),
    [
        ("the cat sat on the mat", "the cat sat on the mat", 1.0, 1.0, 1.0),
        ("", "the cat", 0.0, 0.0, 0.0),
        ("dog", "the cat", 0.0, 0.0, 0.0),
        # 3 of 3 output unigrams in a 6-token reference: P=1, R=1/2; bigrams: "the cat", "cat sat" -> 2/2, 2/5
        ("The cat, sat!", "the cat sat on the mat", 2 / 3, 2 * 1 * 0.4 / 1.4, 2 / 3),
        # no shared bigram; the LCS of "a b c d" and "a c b d" is 3 (a b d / a c d)
        ("a b c d", "a c b d", 1.0, 0.0, 0.75),
    ],
)
def test_rouge_scores(output: str, reference: str, r1: float, r2: float, rl: float) -> None:
    got = rouge.score(output, reference)
    assert got.rouge1 == pytest.approx(r1)
    assert got.rouge2 == pytest.approx(r2)
    assert got.rouge_l == pytest.approx(rl)


def _record(
    prompt_id: str, times: tuple[float, ...], prompt_tokens: int = 10, text: str = ""
) -> RequestRecord:
    return RequestRecord(
        prompt_id=prompt_id,
        prompt_tokens=prompt_tokens,
        output_tokens=len(times),
        ttft_ms=times[0] if times else None,
        e2e_ms=times[-1] if times else 0.0,
        token_times_ms=times,
        output_text=text,
        tokens_counted=True,
    )


def test_formulas_on_two_requests() -> None:
    a = _record("a", (100.0, 150.0, 200.0, 250.0), text="the cat sat on the mat")  # TPOT 50
    b = _record("b", (200.0, 300.0), prompt_tokens=20)  # TPOT 100
    stats = summarize_generation([a, b], 2.0, SPEC)
    assert tpot_ms(a) == 50.0
    assert gaps_ms(b) == [100.0]
    assert stats.requests == 2
    assert stats.errors == 0
    assert stats.ttft_ms.median == 150.0
    assert stats.tpot_ms.median == 75.0
    assert stats.itl_ms.n == 4
    assert stats.itl_ms.max == 100.0
    assert stats.e2e_ms.median == 275.0
    assert stats.prefill_tok_per_s == pytest.approx((10 / 0.1 + 20 / 0.2) / 2)
    assert stats.decode_tok_per_s == pytest.approx((3 / 0.15 + 1 / 0.1) / 2)
    assert stats.output_tok_per_s == 3.0  # 6 tokens / 2 s
    assert stats.output_tokens_mean == 3.0
    assert stats.rouge is not None
    assert stats.rouge.scored == 1  # b has no reference
    assert stats.rouge.rouge1 == 1.0
    assert stats.records == (a, b)
    assert stats.goodput is None


def test_errors_and_goodput() -> None:
    ok = _record("a", (100.0, 150.0))
    slow = _record("a", (900.0, 950.0))
    failed = RequestRecord(prompt_id="b", prompt_tokens=0, output_tokens=0, e2e_ms=5.0, error="connect")
    spec = SPEC.with_(slo=Slo(ttft_ms=500.0))
    stats = summarize_generation([ok, slow, failed], 1.0, spec)
    assert stats.errors == 1
    assert stats.errors_by_kind == {"connect": 1}
    assert stats.goodput == pytest.approx(1 / 3)
    assert stats.ttft_ms.n == 2
