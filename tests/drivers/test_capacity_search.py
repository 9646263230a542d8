"""A capacity search against a loopback server with a known knee: it finds the knee, and ends an
over-saturated level early with its reason (issue 24, scope item 4)."""

from __future__ import annotations

from drivers.capacity import search_capacity
from drivers.completion import RetryPolicy
from drivers.endpoint import EndpointOptions
from protocol import CapacityResult, CapacitySpec, Endpoint, GenerateSpec, Prompt, Slo
from protocol.capacity import derive_capacity
from tests.lab.knee import KneeStub
from tests.lab.sse_server import serve_sse

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


async def _search(stub: KneeStub, capacity: CapacitySpec) -> CapacityResult:
    spec = _spec(capacity)
    with serve_sse(stub) as server:
        found = await search_capacity(spec, server.url, 120.0, OPTIONS)
    assert derive_capacity(found, spec) == found  # what the submitter derives from the records
    return found


async def test_the_search_finds_the_knee_the_stub_was_built_with() -> None:
    stub = KneeStub(knee=3)
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
    stub = KneeStub(knee=2)
    capacity = CapacitySpec(max_concurrency=4, level_s=2.0, level_requests=200, goodput_pct=90)
    found = await _search(stub, capacity)
    failed = [level for level in found.levels if not level.passed]
    assert failed
    for level in failed:
        assert level.ended_early is not None
        # misses past what 90 % of 200 allows, or the first-token times of its start-up ramp rising
        assert level.ended_early.code in ("slo_unreachable", "ttft_rising"), level.ended_early
        assert level.generation.wall_s < capacity.level_s  # ended before its time
        assert level.generation.requests < 200


async def test_a_rate_above_capacity_ends_early_as_a_growing_queue() -> None:
    stub = KneeStub(knee=2, fast_s=0.05, step_s=0.1)  # holds about 2 / 0.065 s = 30 req/s
    capacity = CapacitySpec(rate_min=80, rate_max=160, level_s=4.0, goodput_pct=90)
    found = await _search(stub, capacity)
    first = found.levels[0]
    assert (first.level, first.passed) == (80.0, False)
    assert first.ended_early is not None
    assert first.ended_early.code == "ttft_rising", first.ended_early
    assert first.generation.wall_s < capacity.level_s
    assert (found.knee, found.first_fail, found.finished) == (None, 80.0, True)
