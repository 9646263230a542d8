"""Whether the client held its schedule, derived from raw parts: send rate, lag, CPU, unsent sends."""

from __future__ import annotations

from protocol import GenerateSpec, Prompt, RequestRecord
from protocol.aggregate import derive_generation
from protocol.clientload import client_load, request_rate_achieved
from protocol.genstats import summarize_generation

SPEC = GenerateSpec(
    prompts=(Prompt(id="p", text="x"),), prompts_sha256="0" * 64, request_rate=10.0, duration_s=2.0
)


def _record(planned: float, started: float) -> RequestRecord:
    return RequestRecord(
        prompt_id="p",
        prompt_tokens=1,
        output_tokens=2,
        ttft_ms=5.0,
        e2e_ms=9.0,
        planned_s=planned,
        started_s=started,
    )


def test_a_client_on_schedule_holds_it() -> None:
    records = [_record(k / 10, k / 10 + 0.001) for k in range(20)]
    load = client_load(records, SPEC, cpu_pct=20.0, unsent=0)
    assert load.rate_achieved == 10.0  # 20 sent within the 2 s span
    assert load.lag_p99_ms is not None
    assert 0.9 < load.lag_p99_ms < 1.1
    assert (load.saturated, load.reason) == (False, "")


def test_each_way_of_falling_behind_is_said_with_its_reason() -> None:
    late = [_record(k / 10, k / 5) for k in range(20)]  # sends drift: half land past the span
    load = client_load(late, SPEC, cpu_pct=97.0, unsent=3)
    assert load.saturated
    assert "client CPU 97 %" in load.reason
    assert "send lag p99" in load.reason
    assert "3 planned sends not sent" in load.reason
    assert "req/s of" in load.reason
    assert load.rate_achieved == 5.5  # 11 of them sent within the 2 s span


def test_the_verdict_is_derived_again_from_the_raw_parts() -> None:
    late = [_record(k / 10, k / 5) for k in range(20)]
    honest = summarize_generation(late, 4.0, SPEC, cpu_pct=50.0, unsent=0)
    assert honest.client_saturated
    lie = honest.with_(client_saturated=False, client_saturated_reason="", request_rate_achieved=10.0)
    assert derive_generation(lie, SPEC) == honest  # the submitter's derivation differs from the lie


def test_request_per_s_of_a_timed_run_leaves_the_tail_out() -> None:
    records = [_record(k / 10, k / 10) for k in range(20)]
    stats = summarize_generation(records, 7.0, SPEC)  # the last request ended 5 s after the span
    assert stats.request_per_s == 10.0


def test_the_request_rate_achieved_is_the_sends_within_the_span_per_second_of_it() -> None:
    sends = [_record(0.0, t) for t in (0.0, 0.5, 1.0, 1.5, 2.0, 2.0 + 1e-12, 2.001, 3.0)]
    assert request_rate_achieved(sends, 2.0) == 6 / 2.0  # the span's end counts; 2.001 s and 3 s do not
    assert request_rate_achieved(sends, 4.0) == 8 / 4.0
    assert request_rate_achieved(sends, None) is None
    assert request_rate_achieved(sends, 0.0) is None
    assert request_rate_achieved([], 2.0) == 0.0


def test_every_generate_row_and_the_client_verdict_use_the_one_formula() -> None:
    records = [_record(k / 10, k / 8) for k in range(20)]  # drifting: some land past the 2 s span
    expected = request_rate_achieved(records, 2.0)
    assert expected == 17 / 2.0
    assert client_load(records, SPEC, cpu_pct=None, unsent=0).rate_achieved == expected
    assert summarize_generation(records, 3.0, SPEC).request_rate_achieved == expected
