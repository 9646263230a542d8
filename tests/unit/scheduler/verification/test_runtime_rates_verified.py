"""The submitter's check of a white-box result (`check_figures`) with a runtime's own timers in it:
honest timers pass as sent; timers no request could have produced are refused as inconsistent."""

from __future__ import annotations

from protocol import FailureReason, Measurement, RuntimeRates
from scheduler.verification import Refusal, check_figures
from unit.scheduler.verification.test_figures import WHITE_BOX, white_box


def _with_rates(m: Measurement, rates: RuntimeRates) -> Measurement:
    assert m.generation is not None
    return m.with_(generation=m.generation.with_(runtime_rates=rates))


def _honest_rates(m: Measurement) -> RuntimeRates:
    assert m.generation is not None
    ok = [r for r in m.generation.records if r.error is None]
    tokens = sum(r.prompt_tokens + max(r.output_tokens - 1, 0) for r in ok)
    spent = sum(r.e2e_ms for r in ok)
    return RuntimeRates(
        source="llama_perf_context",
        prompt_tokens=tokens - 1,
        prompt_ms=spent / 2,
        eval_tokens=1,
        eval_ms=spent / 4,
    )


def test_honest_timers_pass_as_sent() -> None:
    sent = _with_rates(white_box(), _honest_rates(white_box()))
    assert check_figures(sent, WHITE_BOX) == sent


def test_invented_timers_are_inconsistent() -> None:
    honest = _honest_rates(white_box())
    for lie in (honest.with_(eval_tokens=1000), honest.with_(prompt_ms=1e7)):
        refusal = check_figures(_with_rates(white_box(), lie), WHITE_BOX)
        assert isinstance(refusal, Refusal)
        assert refusal.reason == FailureReason.INCONSISTENT
        assert "generation.runtime_rates" in refusal.detail
