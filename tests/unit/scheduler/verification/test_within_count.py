"""Issue 50: `within_count` (the submitter's verdict and a bundle's proof) holds a counted job's result
to the server's rise, with the job's results accepted before it, and names the member; the slack is
the result's own slots' last requests."""

from __future__ import annotations

from kit.loads import load_measurement

import scheduler as sch
from protocol import (
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    TaskSpec,
)
from protocol.genstats import summarize_generation

LOAD = GenerateSpec(
    prompts=(Prompt(id="a", text="Say OK."),),
    prompts_sha256="0" * 64,
    max_new_tokens=4,
    concurrency=2,
    duration_s=3.0,
    endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1", metrics_url="http://127.0.0.1:1/metrics"),
)
LONE = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=LOAD, timeout_s=60.0)
FLEET_LOAD = LOAD.with_(fleet_size=2)
FLEET = LONE.with_(generate=FLEET_LOAD)
SIGNED = FLEET.with_(generate=FLEET_LOAD.with_(deal=sch.deal(FLEET_LOAD, 2, 1, seed=7, start_at=1.7e9)))
RISE = sch.ServerCount(
    {"generation_tokens": 100.0}, {"generation_tokens": "vllm:generation_tokens_total"}, "http://s/metrics"
)


def _measured(n: int) -> Measurement:
    records = [
        RequestRecord(
            prompt_id="a", prompt_tokens=9, output_tokens=4, ttft_ms=50.0, e2e_ms=80.0,
            token_times_ms=(50.0, 60.0, 70.0, 80.0), started_s=(i // 2) * 0.081,
        )
        for i in range(n)
    ]  # fmt: skip
    return load_measurement(summarize_generation(records, n * 0.05, LOAD))


def test_a_lone_result_within_the_rise_and_its_slots_slack_passes() -> None:
    m = _measured(27)  # 108 tokens: the rise of 100 and 2 slots x 4 tokens not yet counted
    assert sch.within_count(m, LONE, LONE, RISE, sch.Claimed()) is m
    refused = sch.within_count(_measured(28), LONE, LONE, RISE, sch.Claimed())
    assert isinstance(refused, sch.Refusal)
    assert refused.reason is FailureReason.INVALID
    assert refused.detail.startswith("generation.records[].output_tokens (summed): 112, more than the server")
    assert "plus a slack of 8 for requests" in refused.detail


def test_a_fleet_member_is_held_with_the_members_accepted_before_it_and_named() -> None:
    m = _measured(15)  # 60 tokens: within the rise alone, not with the 60 accepted before it
    assert sch.within_count(m, FLEET, SIGNED, RISE, sch.Claimed()) is m
    refused = sch.within_count(m, FLEET, SIGNED, RISE, sch.Claimed(15, 60, 135))
    assert isinstance(refused, sch.Refusal)
    assert "120 (with the 60 of the job's results accepted before it)" in refused.detail
    assert refused.detail.endswith("(fleet member 1 of 2)")
