"""The capacity search's pure core: the levels it picks, the over-saturation verdicts, the knee derived
again from the levels' records (and refused when they contradict it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from pydantic import ValidationError

from protocol import (
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
    derive,
)
from protocol.capacity import derive_capacity, headline, level_spec, next_level, saturation
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES

SLO = Slo(ttft_ms=100)


def _search(capacity: CapacitySpec, passes: Callable[[float], bool]) -> list[tuple[float, bool]]:
    tried: list[tuple[float, bool]] = []
    while (level := next_level(capacity, tried)) is not None:
        tried.append((level, passes(level)))
        assert len(tried) < 40
    return tried


@pytest.mark.parametrize(
    ("knee", "top", "levels"),
    [
        (5, 16, [1, 2, 4, 8, 6, 5]),
        (4, 16, [1, 2, 4, 8, 6, 5]),
        (1, 16, [1, 2]),
        (0, 16, [1]),  # the lowest level fails: no knee
        (16, 16, [1, 2, 4, 8, 16]),  # the top passes: no failure
        (200, 100, [1, 2, 4, 8, 16, 32, 64, 100]),  # doubling stops at the top
        (37, 256, [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]),
    ],
)
def test_concurrency_doubles_then_bisects_to_the_knee(knee: int, top: int, levels: list[int]) -> None:
    tried = _search(CapacitySpec(max_concurrency=top), lambda level: level <= knee)
    assert [level for level, _ in tried] == levels


@pytest.mark.parametrize("knee", [1.0, 7.3, 33.0, 99.0])
def test_a_rate_search_ends_within_its_resolution(knee: float) -> None:
    capacity = CapacitySpec(rate_min=2, rate_max=100, rate_resolution_pct=10)
    tried = _search(capacity, lambda rate: rate <= knee)
    passed = [rate for rate, ok in tried if ok]
    failed = [rate for rate, ok in tried if not ok]
    if knee < 2:
        assert tried == [(2.0, False)]
        return
    assert max(passed) <= knee < min(failed, default=1e9)
    assert not failed or min(failed) <= max(passed) * 1.1


def test_a_noisy_verdict_never_loops() -> None:
    """A level that passes above one that failed: the knee stays below the lowest failure."""
    verdicts = {1: True, 2: True, 4: False, 3: True}
    tried = _search(CapacitySpec(max_concurrency=64), lambda level: verdicts.get(int(level), True))
    assert tried == [(1, True), (2, True), (4, False), (3, True)]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"max_concurrency": 4, "rate_min": 1, "rate_max": 2},
        {"rate_min": 1},
        {"rate_min": 5, "rate_max": 2},
    ],
)
def test_a_capacity_spec_wants_one_range(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CapacitySpec.model_validate(fields)


def _generate(**capacity: object) -> GenerateSpec:
    return GenerateSpec(
        prompts=(Prompt(id="p", text="hi"),),
        prompts_sha256="0" * 64,
        endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
        slo=SLO,
        capacity=CapacitySpec.model_validate({"max_concurrency": 8, "level_s": 1.0} | capacity),
    )


def _record(at: float, ttft: float, *, error: bool = False) -> RequestRecord:
    if error:
        return RequestRecord(prompt_id="p", prompt_tokens=3, output_tokens=0, e2e_ms=5.0,
                             started_s=at, error="server_error")  # fmt: skip
    times = (ttft, ttft + 5, ttft + 10)
    return RequestRecord(prompt_id="p", prompt_tokens=3, output_tokens=3, ttft_ms=ttft,
                         e2e_ms=ttft + 10, token_times_ms=times, started_s=at)  # fmt: skip


def test_too_few_requests_are_no_verdict() -> None:
    records = [_record(i * 0.1, 500.0, error=True) for i in range(9)]
    assert saturation(records, _generate()) is None


def test_errors_over_the_share_end_a_level() -> None:
    records = [_record(i * 0.1, 20.0, error=i % 4 == 0) for i in range(12)]
    ended = saturation(records, _generate(max_error_pct=10))
    assert ended is not None
    assert ended.code == "errors"
    assert saturation(records, _generate(max_error_pct=30)) is None


def test_misses_past_what_the_level_allows_end_it() -> None:
    records = [_record(i * 0.1, 300.0 if i < 5 else 20.0) for i in range(12)]  # 5 misses
    ended = saturation(records, _generate(level_requests=40, goodput_pct=90))  # 4 allowed of 40
    assert ended is not None
    assert ended.code == "slo_unreachable"
    assert saturation(records, _generate(level_requests=60, goodput_pct=90)) is None  # 6 allowed


def test_first_token_times_rising_with_send_time_end_a_level() -> None:
    rising = [_record(i * 0.1, 20.0 + 30.0 * i) for i in range(15)]
    ended = saturation(list(reversed(rising)), _generate())  # judged by send time, in any order
    assert ended is not None
    assert ended.code == "ttft_rising"
    flat = [_record(i * 0.1, 300.0 + (i % 3)) for i in range(15)]
    assert saturation(flat, _generate()) is None  # slow but steady: no growing queue
    under_slo = [_record(i * 0.1, 5.0 + 5.0 * i) for i in range(15)]  # rising, still within the SLO
    assert (
        saturation(
            under_slo,
            _generate(),
        )
        is None
    )


def _level(generate: GenerateSpec, level: float, ttft: float, ended: bool = False) -> CapacityLevel:
    records = tuple(_record(i * 0.01, ttft) for i in range(12))
    spec = level_spec(generate, level)
    stats = summarize_generation(records, 0.2, spec)
    end = saturation(records, generate) if ended else None
    return CapacityLevel(level=level, generation=stats, ended_early=end, passed=False)


def _measured(generate: GenerateSpec, levels: Sequence[CapacityLevel]) -> CapacityResult:
    raw = CapacityResult(by="concurrency", goodput_pct=90, levels=tuple(levels), knee=None,
                         first_fail=None, finished=False)  # fmt: skip
    return derive_capacity(raw, generate)


def test_the_knee_is_derived_from_the_levels_records() -> None:
    generate = _generate()
    levels = [_level(generate, 1, 20), _level(generate, 2, 20), _level(generate, 4, 300),
              _level(generate, 3, 20)]  # fmt: skip
    found = _measured(generate, levels)
    assert [(v.level, v.passed) for v in found.levels] == [(1, True), (2, True), (4, False), (3, True)]
    assert (found.knee, found.first_fail, found.finished) == (3, 4, True)
    assert derive_capacity(found, generate) == found
    assert headline(found) == found.levels[3].generation.with_(records=())  # the level carries them
    assert found.levels[2].generation.concurrency == 4


def test_levels_off_the_search_path_are_not_kept() -> None:
    generate = _generate()
    levels = [_level(generate, 1, 20), _level(generate, 2, 20), _level(generate, 16, 300)]  # 4 is next
    found = _measured(generate, levels)
    assert [v.level for v in found.levels] == [1, 2, 4]  # the third is judged as the level 4 it must be
    assert found.levels[2].generation.concurrency == 4


def test_an_early_end_its_records_do_not_bear_out_derives_as_none() -> None:
    generate = _generate()
    claimed = _level(generate, 1, 20).with_(ended_early=_level(generate, 1, 300, ended=True).ended_early)
    found = _measured(generate, [claimed])
    assert found.levels[0].ended_early is None
    assert found.levels[0].passed


def _task(generate: GenerateSpec) -> TaskSpec:
    return TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=generate, timeout_s=60)


def test_derive_replaces_a_forged_knee_with_the_records_one() -> None:
    generate = _generate()
    found = _measured(generate, [_level(generate, 1, 20), _level(generate, 2, 300)])
    assert (found.knee, found.first_fail) == (1, 2)
    forged = found.with_(knee=2.0, first_fail=4.0)
    m = Measurement(compute_unit=ComputeUnit.CPU_ONNX, load_ms=NO_SAMPLES, load_first_ms=0.0,
                    first_inference_ms=0.0, warmups_used=0, inference_ms=NO_SAMPLES,
                    peak_load_ram_mb=0.0, peak_inference_ram_mb=0.0, cpu_cores_used=0.0,
                    generation=found.levels[1].generation, capacity=forged)  # fmt: skip
    derived = derive(m, _task(generate))
    assert derived.capacity is not None
    assert (derived.capacity.knee, derived.capacity.first_fail) == (1, 2)
    assert derived.generation == found.levels[0].generation.with_(records=())  # the knee level's figures
