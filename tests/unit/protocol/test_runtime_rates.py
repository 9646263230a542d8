"""A runtime's own timers (llama.cpp's `llama_perf_context`) beside the harness's clock: kept through
`derive` only where they fit the timed requests' records, pooled over processes by adding."""

from __future__ import annotations

import pytest

from protocol import GenerateSpec, Prompt, RequestRecord, RuntimeRates
from protocol.aggregate import derive_generation, runtime_rates_fit
from protocol.genstats import summarize_generation

SPEC = GenerateSpec(prompts=(Prompt(id="a", text="x"), Prompt(id="b", text="y")), prompts_sha256="0" * 64)
RECORDS = (  # 20 + 10 prompt tokens, 4 + 3 output tokens: 27 tokens evaluated, over 700 ms
    RequestRecord(prompt_id="a", prompt_tokens=20, output_tokens=4, ttft_ms=200.0, e2e_ms=400.0),
    RequestRecord(prompt_id="b", prompt_tokens=10, output_tokens=3, ttft_ms=100.0, e2e_ms=300.0),
)


def _rates(
    prompt_tokens: int = 30, prompt_ms: float = 280.0, eval_tokens: int = 5, eval_ms: float = 390.0
) -> RuntimeRates:
    return RuntimeRates(
        source="llama_perf_context",
        prompt_tokens=prompt_tokens,
        prompt_ms=prompt_ms,
        eval_tokens=eval_tokens,
        eval_ms=eval_ms,
    )


@pytest.mark.parametrize(
    ("rates", "fits"),
    [
        (_rates(), True),
        (_rates(prompt_tokens=29, eval_tokens=6), True),  # a one-token prompt counted as generation
        (_rates(prompt_ms=300.0, eval_ms=400.0), True),  # exactly the requests' time
        (_rates(eval_tokens=50), False),  # tokens no request had
        (_rates(prompt_tokens=3), False),
        (_rates(prompt_ms=10.0, eval_ms=800.0), False),  # more time than the requests took
    ],
)
def test_timers_fit_only_the_tokens_and_time_of_the_requests(rates: RuntimeRates, fits: bool) -> None:
    assert runtime_rates_fit(rates, RECORDS) is fits


def test_derive_keeps_fitting_timers_and_drops_invented_ones() -> None:
    stats = summarize_generation(RECORDS, 0.7, SPEC)
    honest = stats.with_(runtime_rates=_rates())
    assert derive_generation(honest, SPEC).runtime_rates == _rates()
    invented = stats.with_(runtime_rates=_rates(prompt_ms=1.0, eval_ms=1.0, eval_tokens=500))
    assert derive_generation(invented, SPEC).runtime_rates is None  # the submitter's check then differs


def test_rates_and_pooling() -> None:
    one = _rates(prompt_tokens=30, prompt_ms=300.0, eval_tokens=5, eval_ms=100.0)
    assert one.pp_tok_per_s() == pytest.approx(100.0)
    assert one.tg_tok_per_s() == pytest.approx(50.0)
    both = one.plus(one)
    assert (both.prompt_tokens, both.prompt_ms, both.eval_tokens, both.eval_ms) == (60, 600.0, 10, 200.0)
    assert _rates(prompt_ms=0.0, eval_ms=0.0).pp_tok_per_s() is None  # nothing timed: no rate, not infinity
