"""Load records held to physics on the submitter: a successful request's E2E at least its TTFT, both
above zero and its TTFT above half its worker's round trip to the server; a closed loop's count within
what its slots send over the run. Each break is refused `invalid`, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from kit.loads import load_measurement

from protocol import (
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    TaskSpec,
    derive,
)
from protocol.genstats import summarize_generation
from scheduler import Refusal, check_figures, check_sends

CLOSED = GenerateSpec(
    prompts=(Prompt(id="a", text="one"),),
    prompts_sha256="0" * 64,
    endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
    concurrency=2,
    duration_s=2.0,
)
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=CLOSED, timeout_s=60.0)
RTT_MS = 8.0


def _record(started: float, ttft: float = 20.0, e2e: float = 30.0, **fields: Any) -> RequestRecord:
    times = (ttft, e2e) if e2e > 0 else ()
    return RequestRecord(
        prompt_id="a", prompt_tokens=3, output_tokens=2, ttft_ms=ttft, e2e_ms=e2e,
        token_times_ms=times, started_s=started, **fields,
    )  # fmt: skip


def _honest(n: int = 20) -> list[RequestRecord]:
    """Two slots, each request 30 ms, one after another."""
    return [_record(started=(i // 2) * 0.031) for i in range(n)]


def _checked(records: list[RequestRecord], rtt_ms: float | None = RTT_MS) -> Measurement | Refusal:
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    stats = summarize_generation(records, wall, CLOSED).with_(rtt_ms=rtt_ms)
    measured = load_measurement(stats)
    figures = check_figures(derive(measured, SPEC), SPEC)
    if isinstance(figures, Refusal):
        return figures
    return check_sends(figures, SPEC, SPEC)


def test_an_honest_closed_loop_passes() -> None:
    assert not isinstance(_checked(_honest()), Refusal)


def test_failed_requests_of_any_length_pass() -> None:
    failed = _record(0.5, ttft=0.0, e2e=0.0, error="connect")
    assert not isinstance(_checked([*_honest(), failed.with_(ttft_ms=None)]), Refusal)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (_record(0.4, ttft=0.0, e2e=0.0), "records[20].e2e_ms"),
        (_record(0.4, ttft=0.0, e2e=5.0), "records[20].ttft_ms"),
        (_record(0.4, ttft=1.5, e2e=5.0), "records[20].ttft_ms"),
    ],
    ids=["zero-length", "instant-first-token", "quicker-than-the-round-trip"],
)
def test_an_impossible_record_is_refused_naming_its_field(bad: RequestRecord, field: str) -> None:
    refusal = _checked([*_honest(), bad])
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert f"generation.{field}:" in refusal.detail


def test_a_thousand_zero_length_records_at_one_instant_are_refused() -> None:
    liar = [_record(0.5, ttft=0.0, e2e=0.0) for _ in range(1000)]
    refusal = _checked(_honest() + liar)
    assert isinstance(refusal, Refusal)
    assert "e2e_ms" in refusal.detail


def test_a_closed_loop_with_more_records_than_its_slots_send_is_refused() -> None:
    """Requests of 30 ms, each slot's one after another (the in-flight check passes them), but 1,000
    of them for a 2 s run of 2 slots: they would take 15 s."""
    refusal = _checked(_honest(1000))
    assert isinstance(refusal, Refusal)
    assert "generation.records: 1000 records, more than its 2 slots send in 3 s" in refusal.detail


def test_a_slow_servers_one_request_per_slot_past_the_run_is_not_a_lie() -> None:
    """A loaded CPU server answers each slot's one request in 39 s, past the 2 s run (its drain): each
    slot sent one request, started at once, which is what a closed loop does; not refused."""
    slow = [
        _record(started=0.0, ttft=30_000.0, e2e=39_000.0),
        _record(started=0.001, ttft=30_000.0, e2e=39_000.0),
    ]
    checked = _checked(slow)
    assert isinstance(checked, Measurement), checked
    assert isinstance(_checked([*slow, _record(started=0.002, ttft=30_000.0, e2e=39_000.0)]), Refusal)
