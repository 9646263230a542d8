"""A capacity search against a loopback server with a known knee: it finds the knee, and ends an
over-saturated level early with its reason (issue 24, scope item 4).

The server is a process of its own (`kit.knee.serving_apart`), as a model server is: in a thread of
the test's process its first tokens waited for the client's work, and at load 4 a level below the
knee missed the SLO. A level that ended early is told by its sends (fewer than its schedule or its
`level_requests`), never by its seconds, which a busy machine stretches."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from kit.knee import serving_apart

from drivers.endpoint.capacity import search_capacity
from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions
from protocol import (
    MAX_ENVELOPE,
    CapacityLevel,
    CapacityResult,
    CapacitySpec,
    ComputeUnit,
    Endpoint,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    Slo,
    TaskSpec,
)
from protocol.arrivals import arrivals
from protocol.capacity import (
    MAX_SEARCH_RECORDS,
    RECORD_BYTES,
    SEARCH_BYTES,
    TOKEN_BYTES,
    derive_capacity,
    headline,
    level_spec,
)
from protocol.codec import pack_body
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES
from scheduler import Refusal, check_sends

OPTIONS = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1, seed=5)
SLO = Slo(ttft_ms=150)  # the stub: 20 ms up to its knee, 270 ms and more beyond


def _spec(capacity: CapacitySpec) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(8))
    return GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=4,
        endpoint=Endpoint(model="knee"),
        slo=SLO,
        capacity=capacity,
    )


SEED = 2**61 + 9  # a rate search's seed, as the submitter draws it for the offer


async def _search(stub: Mapping[str, float], capacity: CapacitySpec) -> CapacityResult:
    """The search run, its figures what the submitter derives from its records, and its records the
    load the submitter gave (`scheduler.check_sends`: a rate search's levels from the offer's seed)."""
    spec = _spec(capacity).with_(arrival_seed=SEED if capacity.max_concurrency is None else None)
    with serving_apart(**stub) as url:
        found = await search_capacity(spec, url, 120.0, OPTIONS)
    assert derive_capacity(found, spec) == found  # what the submitter derives from the records
    task = TaskSpec(
        compute_unit=ComputeUnit.CPU_ONNX, generate=spec.with_(arrival_seed=None), timeout_s=120.0
    )
    m = _measured(found)
    assert check_sends(m, task, task.with_(generate=spec)) == m
    return found


def _measured(found: CapacityResult) -> Measurement:
    return Measurement(compute_unit=ComputeUnit.CPU_ONNX, load_ms=NO_SAMPLES, load_first_ms=0.0,
                       first_inference_ms=0.0, warmups_used=0, inference_ms=NO_SAMPLES,
                       peak_load_ram_mb=0.0, peak_inference_ram_mb=0.0, cpu_cores_used=0.0,
                       generation=headline(found), capacity=found)  # fmt: skip


async def test_the_search_finds_the_knee_the_stub_was_built_with() -> None:
    stub = {"knee": 3}
    found = await _search(stub, CapacitySpec(max_concurrency=8, level_s=1.0, goodput_pct=90))
    tried = [(level.level, level.passed) for level in found.levels]
    assert found.finished, tried
    assert found.knee is not None, tried
    assert abs(found.knee - 3) <= 1, tried  # within one level
    assert found.first_fail == found.knee + 1, tried
    assert [level for level, _ in tried][:3] == [1.0, 2.0, 4.0]  # doubling, then bisecting
    for level in found.levels:
        assert level.generation.concurrency == int(level.level)
        assert level.generation.requests > 0
        assert level.generation.goodput is not None


async def test_an_over_saturated_level_ends_early_with_its_reason() -> None:
    stub = {"knee": 2}
    # 20 requests a level: past 2 misses none can pass, and a level is judged from its 10th request
    # on, so a failing level ends early however slowly a busy machine lets it send
    capacity = CapacitySpec(max_concurrency=4, level_s=4.0, level_requests=20, goodput_pct=90)
    found = await _search(stub, capacity)
    failed = [level for level in found.levels if not level.passed]
    assert failed
    for level in failed:
        assert level.ended_early is not None, level
        # misses past what 90 % of 20 allows, or the first-token times of its start-up ramp rising
        assert level.ended_early.code in ("slo_unreachable", "ttft_rising"), level.ended_early
        sent = level.generation.requests_sent
        assert sent is not None
        assert sent < 20  # ended before its `level_requests`


async def test_a_rate_above_capacity_ends_early_as_a_growing_queue() -> None:
    stub = {"knee": 2, "fast_s": 0.05, "step_s": 0.1}  # holds about 2 / 0.065 s = 30 req/s
    capacity = CapacitySpec(rate_min=80, rate_max=160, level_s=4.0, goodput_pct=90)
    found = await _search(stub, capacity)
    first = found.levels[0]
    assert (first.level, first.passed) == (80.0, False)
    assert first.ended_early is not None
    assert first.ended_early.code == "ttft_rising", first.ended_early
    sent = first.generation.requests_sent
    assert sent is not None
    assert sent < len(arrivals(80.0, capacity.level_s, SEED))  # ended before its schedule's last send
    assert (found.knee, found.first_fail, found.finished) == (None, 80.0, True)


async def test_a_rate_search_sends_the_seeded_schedule_of_each_level() -> None:
    """Levels that ran to their end, from the offer's seed (the same draws at each rate), pass the
    submitter's check; checked against another seed's schedules, they are refused."""
    stub = {"knee": 8, "fast_s": 0.01, "step_s": 0.1}
    capacity = CapacitySpec(rate_min=5, rate_max=20, level_s=1.0, goodput_pct=90, rate_resolution_pct=50)
    found = await _search(stub, capacity)
    full = [level for level in found.levels if level.ended_early is None]
    assert full, found.levels
    spec = _spec(capacity)
    task = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=spec, timeout_s=120.0)
    other = task.with_(generate=spec.with_(arrival_seed=SEED + 1))
    refusal = check_sends(_measured(found), task, other)
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith("capacity.levels[0].generation.records"), refusal.detail


@pytest.mark.parametrize("tokens", [16, 256, 4096])
def test_a_search_at_its_record_budget_fits_one_signed_result(tokens: int) -> None:
    budget = min(MAX_SEARCH_RECORDS, SEARCH_BYTES // (tokens * TOKEN_BYTES + RECORD_BYTES))
    times = tuple(123.456789 + 7.123456789 * i for i in range(tokens))
    record = RequestRecord(prompt_id="summaries-01", prompt_tokens=120, output_tokens=tokens,
                           ttft_ms=times[0], e2e_ms=times[-1], token_times_ms=times,
                           started_s=1.23456789, tokens_counted=True, text_dropped=True)  # fmt: skip
    spec = _spec(CapacitySpec(max_concurrency=1024)).with_(max_new_tokens=tokens)
    levels, share = [], budget // 10
    for n in range(10):
        stats = summarize_generation((record,) * share, 9.87654321, level_spec(spec, 2.0**n))
        levels.append(CapacityLevel(level=2.0**n, generation=stats, passed=True))
    found = derive_capacity(CapacityResult(by="concurrency", goodput_pct=90, levels=tuple(levels),
                                           knee=None, first_fail=None, finished=False), spec)  # fmt: skip
    size = len(pack_body(_measured(found)))
    assert size < MAX_ENVELOPE - (64 << 10)  # room for the rest of the signed body
