"""Issue 23: every result a worker can produce is sealed and travels in one frame, cut only as declared.

Figures (msgpack): a float is 9 bytes, so `MAX_SAMPLES` (262,144) samples are 2.25 MiB, inside
`MAX_ENVELOPE` (4 MiB less 64 KiB); a generation result of 2,000 requests x 4,096 token times is
about 74 MB and must be cut (declared in `Measurement.trimmed`).
"""

from __future__ import annotations

import os

import pytest
from conftest_data import make_profile

from node.worker.fit import TEXT_BYTES, fit_result
from protocol import (
    DOMAIN_RESULT,
    MAX_ENVELOPE,
    MAX_SAMPLES,
    ComputeUnit,
    GenerationStats,
    Measurement,
    RequestRecord,
    Result,
    ResultBody,
    Stats,
    TaskSpec,
)
from protocol.codec import decode, encode
from protocol.framing import MAX_FRAME
from protocol.records import open_envelope, peer_id_from_public_key, public_key_of, seal

SEED = os.urandom(32)
WORKER = peer_id_from_public_key(public_key_of(SEED))
STATS = Stats(n=1, min=1, max=1, mean=1, median=1, stddev=0, p90=1, p95=1, p99=1, cv=0)


def _measurement(samples: int = 10, generation: GenerationStats | None = None) -> Measurement:
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=STATS, load_first_ms=1, first_inference_ms=1,
        warmups_used=1, inference_ms=STATS, samples_ms=tuple(0.123456789 + i for i in range(samples)),
        peak_load_ram_mb=1, peak_inference_ram_mb=1, cpu_cores_used=1, generation=generation,
    )  # fmt: skip


def _body(measurement: Measurement) -> ResultBody:
    return ResultBody(
        campaign_id="c", task_id="t", lease_id="l", worker=WORKER, submitter=WORKER, model_sha256="a" * 64,
        device=make_profile(), measurement=measurement, finished_at=1.0,
    )  # fmt: skip


def _travels(body: ResultBody) -> ResultBody:
    """Seal, frame, decode and open the body as the submitter would; the body it reads."""
    result = Result(task_id="t", lease_id="l", envelope=seal(body, DOMAIN_RESULT, SEED))
    wire = encode(result)
    assert len(wire) <= MAX_FRAME
    received = decode(wire)
    assert isinstance(received, Result)
    return open_envelope(received.envelope, DOMAIN_RESULT, ResultBody, now=2.0, signer=WORKER)


def _generation(requests: int, tokens: int, text: str) -> GenerationStats:
    record = RequestRecord(
        prompt_id="p", prompt_tokens=10, output_tokens=tokens, ttft_ms=5.0, e2e_ms=50.0 + tokens,
        token_times_ms=tuple(5.0 + i * 0.987654321 for i in range(tokens)), output_text=text,
    )  # fmt: skip
    return GenerationStats(
        requests=requests, errors=0, wall_s=1, ttft_ms=STATS, tpot_ms=STATS, itl_ms=STATS, e2e_ms=STATS,
        prompt_tokens_mean=10, output_tokens_mean=tokens, prefill_tok_per_s=1, decode_tok_per_s=1,
        output_tok_per_s=1, request_per_s=1, records=(record,) * requests,
    )  # fmt: skip


def test_a_task_cannot_ask_for_more_samples_than_the_wire_carries() -> None:
    TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=MAX_SAMPLES // 4, processes=4)
    with pytest.raises(ValueError, match="timed runs per task"):
        TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=100_000, processes=3)
    with pytest.raises(ValueError, match="max_runs"):
        TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=10, processes=2, max_runs=MAX_SAMPLES)


def test_a_result_at_the_sample_limit_is_sealed_whole_and_travels_in_one_frame() -> None:
    body = _body(_measurement(MAX_SAMPLES))
    assert fit_result(body) is body  # nothing to cut
    received = _travels(body)
    assert len(received.measurement.samples_ms) == MAX_SAMPLES
    assert received.measurement.trimmed == ()


def test_a_long_output_text_is_cut_to_what_the_wire_takes_and_declared() -> None:
    body = _body(_measurement(generation=_generation(2, 8, "é" * 100_000)))  # 200,000 bytes of UTF-8
    fitted = fit_result(body)
    assert fitted is not None
    received = _travels(fitted)
    record = received.measurement.generation.records[0]  # type: ignore[union-attr]
    assert len(record.output_text.encode()) <= TEXT_BYTES
    assert "output_text cut" in received.measurement.trimmed[0]


def test_a_huge_generation_result_is_cut_as_declared_and_travels() -> None:
    body = _body(_measurement(400, _generation(400, 2048, "word " * 2000)))  # 7.4 MB of token times
    fitted = fit_result(body)
    assert fitted is not None
    received = _travels(fitted)
    trimmed = received.measurement.trimmed
    assert any("output_text dropped" in t for t in trimmed), trimmed
    assert any("token_times_ms thinned" in t for t in trimmed), trimmed
    generation = received.measurement.generation
    assert generation is not None
    assert len(generation.records) == 400  # every request kept, with its counts whole
    assert generation.records[0].output_tokens == 2048
    assert generation.records[0].token_times_ms[-1] == 5.0 + 2047 * 0.987654321  # the last time kept
    print(f"\n{trimmed}")


def test_a_result_that_cannot_fit_is_none_so_the_worker_reports_a_failure() -> None:
    assert fit_result(_body(_measurement(10)), limit=100) is None
    assert MAX_ENVELOPE < MAX_FRAME
