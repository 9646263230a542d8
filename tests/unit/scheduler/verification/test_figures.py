"""The submitter's check of a result's figures: derived again from the raw parts, compared, refused.

Honest measurements are built as the worker builds them (raw parts, then `protocol.derive`); each
tampered one changes one thing and must be refused with the field and both values named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from protocol import (
    AsyncRun,
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    RunConditions,
    Slo,
    TaskSpec,
    Value,
    derive,
)
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES
from scheduler import Refusal, check_figures

TENSOR = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=5, load_runs=2, processes=2, timeout_s=60.0)
GENERATE = GenerateSpec(
    prompts=(Prompt(id="a", text="Say it.", reference="the cat sat on the mat"),
             Prompt(id="b", text="Again.", reference="a dog ran")),
    prompts_sha256="0" * 64,
    quality=("rouge",),
    slo=Slo(ttft_ms=35.0),
)  # fmt: skip
WHITE_BOX = TaskSpec(compute_unit=ComputeUnit.CPU_TORCH, runs=1, load_runs=1, processes=1, generate=GENERATE)
ENDPOINT = TaskSpec(
    compute_unit=ComputeUnit.CPU_ONNX,
    generate=GENERATE.with_(endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"), concurrency=2),
)
RECORDS = (
    RequestRecord(prompt_id="a", prompt_tokens=12, output_tokens=4, ttft_ms=30.0, e2e_ms=61.0,
                  token_times_ms=(30.0, 41.0, 50.5, 61.0), output_text="the cat sat on a mat", started_s=0.0),
    RequestRecord(prompt_id="b", prompt_tokens=9, output_tokens=3, ttft_ms=40.0, e2e_ms=70.0,
                  token_times_ms=(40.0, 55.0, 70.0), output_text="a dog sat", started_s=0.062),
    RequestRecord(prompt_id="a", prompt_tokens=12, output_tokens=0, e2e_ms=5.0, started_s=0.133,
                  error="http_status", error_detail="503"),
)  # fmt: skip


def _raw(**parts: Any) -> Measurement:
    """A measurement with raw parts only, every figure still zero (as the worker starts one)."""
    base: dict[str, Any] = {
        "compute_unit": ComputeUnit.CPU_ONNX,
        "load_ms": NO_SAMPLES,
        "load_first_ms": 0.0,
        "first_inference_ms": 0.0,
        "warmups_used": 1,
        "inference_ms": NO_SAMPLES,
        "peak_load_ram_mb": 50.0,
        "peak_inference_ram_mb": 60.0,
        "cpu_cores_used": 1.0,
        "conditions": RunConditions(background_cores=0.05),
    }
    return Measurement(**{**base, **parts})


def tensor() -> Measurement:
    samples = (10.0, 11.0, 10.5, 12.0, 10.2, 13.0, 12.5, 12.9, 14.0, 31.0)
    raw = _raw(samples_ms=samples, process_runs=(5, 5), load_samples_ms=(100.0, 90.0, 95.0, 92.0),
               first_inferences_ms=(20.0, 22.0))  # fmt: skip
    return derive(raw, TENSOR)


def white_box() -> Measurement:
    generation = summarize_generation(RECORDS, 0.2, GENERATE)
    raw = _raw(compute_unit=ComputeUnit.CPU_TORCH, samples_ms=tuple(r.e2e_ms for r in RECORDS),
               process_runs=(3,), load_samples_ms=(900.0,), first_inferences_ms=(80.0,),
               generation=generation)  # fmt: skip
    return derive(raw, WHITE_BOX)


def endpoint() -> Measurement:
    assert ENDPOINT.generate is not None
    generation = summarize_generation(RECORDS, 0.138, ENDPOINT.generate).with_(rtt_ms=0.4)
    return derive(_raw(warmups_used=0, generation=generation), ENDPOINT)


KINDS: dict[str, tuple[Callable[[], Measurement], TaskSpec]] = {
    "tensor": (tensor, TENSOR),
    "white-box generate": (white_box, WHITE_BOX),
    "endpoint": (endpoint, ENDPOINT),
}


def at(value: Any, path: str) -> Any:
    for name in path.split("."):
        value = getattr(value, name)
    return value


def changed(value: Value, path: str, new: object) -> Any:
    """`value` with the field at a dotted path replaced (the frozen parents copied)."""
    head, _, rest = path.partition(".")
    return value.with_(**{head: changed(getattr(value, head), rest, new) if rest else new})


@pytest.mark.parametrize("kind", KINDS)
def test_an_honest_measurement_of_every_kind_passes_as_it_was_sent(kind: str) -> None:
    make, spec = KINDS[kind]
    sent = make()
    assert sent.inference_ms.n > 0
    assert check_figures(sent, spec) == sent


def test_the_honest_figures_are_the_ones_a_reader_expects() -> None:
    m = tensor()
    assert m.process_medians_ms == (10.5, 13.0)
    assert (m.inference_ms.median, m.inference_ms.max, m.inference_ms.outliers) == (11.75, 31.0, 1)
    assert (m.load_first_ms, m.first_inference_ms, m.load_ms.median) == (97.5, 21.0, 93.5)
    assert m.unstable  # 31 ms is more than 50 % from the mean
    g = white_box().generation
    assert g is not None
    assert (g.requests, g.errors, g.ttft_ms.median, g.goodput) == (3, 1, 35.0, 1 / 3)


def test_a_last_digit_difference_is_within_the_tolerance() -> None:
    sent = tensor()
    nudged = changed(sent, "inference_ms.mean", sent.inference_ms.mean * (1 + 1e-12))
    assert isinstance(check_figures(nudged, TENSOR), Measurement)


INCONSISTENT = [
    ("tensor", "inference_ms.median", 5.0),
    ("tensor", "inference_ms.p99", 14.0),
    ("tensor", "inference_ms.stddev", 0.5),
    ("tensor", "inference_ms.cv", 0.01),
    ("tensor", "inference_ms.outliers", 0),
    ("tensor", "inference_ms.n", 12),
    ("tensor", "process_spread_pct", 1.0),
    ("tensor", "load_ms.mean", 10.0),
    ("tensor", "load_first_ms", 1.0),
    ("tensor", "first_inference_ms", 2.0),
    ("tensor", "unstable", False),
    ("tensor", "compute_unit", ComputeUnit.GPU_ONNX),
    ("white-box generate", "generation.ttft_ms.p90", 20.0),
    ("white-box generate", "generation.tpot_ms.median", 1.0),
    ("white-box generate", "generation.itl_ms.p99", 1.0),
    ("white-box generate", "generation.e2e_ms.median", 1.0),
    ("white-box generate", "generation.output_tok_per_s", 1e6),
    ("white-box generate", "generation.decode_tok_per_s", 1e6),
    ("white-box generate", "generation.goodput", 1.0),
    ("white-box generate", "generation.requests", 30),
    ("white-box generate", "generation.rouge.rouge_l", 1.0),
    ("white-box generate", "inference_ms.median", 1.0),
    ("endpoint", "generation.ttft_ms.p90", 20.0),
    ("endpoint", "generation.request_per_s", 99.0),
    ("endpoint", "generation.concurrency", 64),
    ("endpoint", "inference_ms.median", 1.0),
    ("endpoint", "first_inference_ms", 1.0),
]


@pytest.mark.parametrize(("kind", "path", "lie"), INCONSISTENT, ids=[f"{k}: {p}" for k, p, _ in INCONSISTENT])
def test_a_figure_its_raw_parts_contradict_is_refused_inconsistent_with_both_values(
    kind: str, path: str, lie: object
) -> None:
    make, spec = KINDS[kind]
    honest = make()
    refusal = check_figures(changed(honest, path, lie), spec)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INCONSISTENT
    assert f"{path}: the worker says {lie!r}, its raw parts give {at(honest, path)!r}" in refusal.detail


def test_a_tensor_sample_that_moves_the_median_names_the_median() -> None:
    honest = tensor()
    lie = honest.with_(samples_ms=(1.0, *honest.samples_ms[1:]))  # the figures still those of the old samples
    refusal = check_figures(lie, TENSOR)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INCONSISTENT
    assert "inference_ms.min: the worker says 10.0, its raw parts give 1.0" in refusal.detail


def test_white_box_samples_that_are_not_its_requests_are_inconsistent() -> None:
    honest = white_box()
    refusal = check_figures(honest.with_(samples_ms=(6.0, 70.0, 5.0)), WHITE_BOX)
    assert isinstance(refusal, Refusal)
    assert "samples_ms[0]: the worker says 6.0, its raw parts give 61.0" in refusal.detail


def _record(m: Measurement, index: int, **changes: Any) -> Measurement:
    assert m.generation is not None
    records = list(m.generation.records)
    records[index] = records[index].with_(**changes)
    return m.with_(generation=m.generation.with_(records=tuple(records)))


INVALID: list[tuple[str, str, Callable[[Measurement], Measurement], str]] = [
    ("NaN sample", "tensor", lambda m: m.with_(samples_ms=(math.nan, *m.samples_ms[1:])),
     "samples_ms[0] is nan"),
    ("NaN median", "tensor", lambda m: changed(m, "inference_ms.median", math.nan),
     "inference_ms.median is nan"),
    ("infinite p90", "tensor", lambda m: changed(m, "inference_ms.p90", math.inf), "inference_ms.p90 is inf"),
    ("infinite TTFT", "white-box generate", lambda m: changed(m, "generation.ttft_ms.median", -math.inf),
     "generation.ttft_ms.median is -inf"),
    ("NaN in a record", "endpoint", lambda m: _record(m, 0, token_times_ms=(30.0, math.nan)),
     "generation.records[0].token_times_ms[1] is nan"),
    ("negative sample", "tensor", lambda m: m.with_(samples_ms=(-1.0, *m.samples_ms[1:])),
     "samples_ms[0]: a negative duration, -1.0 ms"),
    ("negative load", "tensor", lambda m: m.with_(load_samples_ms=(-5.0, *m.load_samples_ms[1:])),
     "load_samples_ms[0]: a negative duration"),
    ("negative gap between tokens", "endpoint", lambda m: _record(m, 0, token_times_ms=(30.0, 20.0)),
     "generation.records[0].token_times_ms: a negative time or gap"),
    ("first token after the end", "endpoint", lambda m: _record(m, 1, ttft_ms=71.0),
     "generation.records[1].ttft_ms: first token at 71.0 ms, after the end at 70.0 ms"),
    ("sample over the timeout", "tensor", lambda m: m.with_(samples_ms=(1e9, *m.samples_ms[1:])),
     "samples_ms[0]: 1000000000.0 ms, longer than the task's timeout of 60 s"),
    ("request over the timeout", "endpoint", lambda m: _record(m, 2, e2e_ms=1e12),
     "generation.records[2].e2e_ms: 1000000000000.0 ms, longer than the task's timeout"),
    ("wall time shorter than the requests", "endpoint", lambda m: changed(m, "generation.wall_s", 0.01),
     "after its wall time of 0.01 s"),
    ("wall time over the timeout", "endpoint", lambda m: changed(m, "generation.wall_s", 1e6),
     "generation.wall_s: 1000000.0 s, longer than the task's timeout"),
    ("runs that do not add up", "tensor", lambda m: m.with_(process_runs=(5, 6)),
     "samples_ms: 10 values, the processes' runs add up to 11"),
    ("processes not asked for", "tensor", lambda m: m.with_(process_runs=(10,)),
     "process_runs: 1 processes, the task asked for 2"),
    ("fewer runs than asked", "tensor", lambda m: m.with_(process_runs=(4, 6)),
     "process_runs[0]: 4 timed runs, the task allows 5 to 5"),
    ("loads missing", "tensor", lambda m: m.with_(load_samples_ms=(100.0,)),
     "load_samples_ms: 1 values, the task's loads are 4"),
    ("first inferences missing", "tensor", lambda m: m.with_(first_inferences_ms=()),
     "first_inferences_ms: 0 values, its processes are 2"),
    ("records missing", "white-box generate", lambda m: _record(m, 0).with_(samples_ms=(1.0, 2.0, 3.0, 4.0),
     process_runs=(4,)), "generation.records: 3 records for 4 requests"),
    ("samples on an endpoint", "endpoint", lambda m: m.with_(samples_ms=(1.0,)),
     "samples_ms: 1 values, an endpoint task runs no process"),
    ("generation on a tensor task", "tensor", lambda m: m.with_(generation=white_box().generation),
     "generation: generate figures for a tensor task"),
    ("negative background load", "tensor", lambda m: changed(m, "conditions.background_cores", -2.0),
     "conditions.background_cores: the worker says -2.0 cores, outside 0 to"),
    ("GPU use over 100 %", "tensor", lambda m: m.with_(gpu_util_pct=150.0),
     "gpu_util_pct: the worker says 150.0 %, outside 0 to 100 %"),
    ("a throughput run for one of two processes", "tensor", lambda m: m.with_(async_runs=(_async(1, 40),)),
     "async_runs: 1 throughput runs for 2 processes"),
    ("a throughput run with fewer inferences than requests", "tensor",
     lambda m: m.with_(async_runs=(_async(2, 1), _async(1, 40))),
     "async_runs[0]: 1 inferences, fewer than its 2 requests"),
    ("a throughput run over the timeout", "tensor",
     lambda m: m.with_(async_runs=(_async(1, 40, wall_ms=1e9), _async(1, 40))),
     "async_runs[0].wall_ms: 1000000000.0 ms, longer than the task's timeout"),
]  # fmt: skip


def _async(requests: int, inferences: int, wall_ms: float = 1000.0) -> AsyncRun:
    return AsyncRun(requests=requests, inferences=inferences, wall_ms=wall_ms)


def test_an_honest_throughput_run_per_process_passes_and_its_rate_is_the_median() -> None:
    m = tensor().with_(async_runs=(_async(2, 40), _async(2, 60)))
    checked = check_figures(m, TENSOR)
    assert isinstance(checked, Measurement), checked
    assert checked.throughput_per_s == 50.0


def test_a_throughput_its_timed_runs_cannot_give_is_withheld_with_its_reason_and_the_result_stands() -> None:
    """A busy machine gave this: every timed run starved (the fastest 11 ms), the throughput run after
    them in a quieter spell (410.8/s with one request). The bound reads two moments; the figure it
    cannot vouch for is withheld and said, and the timed figures stand, for the honest worker that
    derived it so and for a liar's inflated rate alike; a worker that leaves the reason out is
    contradicted by its own raw parts."""
    fast = (_async(2, 40, wall_ms=1.0), _async(1, 40))  # 40,000/s on process 0: over 3 x 2 / 10 ms
    honest = derive(tensor().with_(async_runs=fast), TENSOR)
    checked = check_figures(honest, TENSOR)
    assert isinstance(checked, Measurement), checked
    assert checked.throughput_per_s is None
    assert checked.inference_ms == tensor().inference_ms
    assert checked.unstable
    said = [r for r in checked.unstable_reasons if r.startswith("throughput run 0 at 4e+04/s")]
    assert said == [
        "throughput run 0 at 4e+04/s with 2 request(s) is over 3 x its requests over its process's "
        "fastest timed run (10 ms): withheld (the machine's speed moved between them, or it is not "
        "this model's rate)"
    ]
    assert not any("throughput run 1" in r for r in checked.unstable_reasons)  # 40/s: within 3 x 1 / 12.5 ms
    silent = tensor().with_(async_runs=fast)  # the same runs, the reason left out
    refusal = check_figures(silent, TENSOR)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INCONSISTENT
    assert "unstable_reasons" in refusal.detail


def test_more_requests_in_flight_than_the_placed_cpu_has_cores_are_refused() -> None:
    """A rate bound by requests / the fastest run is beaten by claiming more requests: a CPU plugin
    runs one request per stream and at most one stream a core of the profile the task was placed by."""
    from kit.data import make_profile

    placed = make_profile().with_(cores_logical=2)
    honest = tensor().with_(async_runs=(_async(2, 40), _async(2, 60)))
    assert isinstance(check_figures(honest, TENSOR, placed), Measurement)
    lie = tensor().with_(async_runs=(_async(64, 40), _async(64, 60)))
    refusal = check_figures(lie, TENSOR, placed)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert "async_runs: 64 requests in flight on a 2-core CPU" in refusal.detail


@pytest.mark.parametrize(("kind", "lie", "said"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_numbers_that_cannot_be_a_measurement_are_refused_invalid(
    kind: str, lie: Callable[[Measurement], Measurement], said: str
) -> None:
    make, spec = KINDS[kind]
    refusal = check_figures(lie(make()), spec)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert said in refusal.detail


def test_the_stopping_rule_allows_runs_up_to_its_cap() -> None:
    spec = TENSOR.with_(ci_target_pct=5.0, max_runs=8)
    honest = derive(tensor().with_(process_runs=(3, 7)), spec.with_(runs=3))
    assert isinstance(check_figures(honest, spec.with_(runs=3)), Measurement)
    refusal = check_figures(derive(honest.with_(process_runs=(1, 9)), spec), spec)
    assert isinstance(refusal, Refusal)
    assert "process_runs[0]: 1 timed runs, the task allows 5 to 8" in refusal.detail
