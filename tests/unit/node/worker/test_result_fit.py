"""Issue 23: every result a worker can produce is sealed and travels in one frame, cut only as declared,
and a cut result's figures are the ones its kept records give, so the submitter's check accepts it.

Figures (msgpack): a float is 9 bytes, so `MAX_SAMPLES` (262,144) samples are 2.25 MiB, inside
`MAX_ENVELOPE` (4 MiB less 64 KiB); a generation result of 300 requests x 2,048 token times is
about 6 MB and must be cut (declared in `Measurement.trimmed`).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from kit.data import make_profile

from node.worker.fit import DETAIL_CHARS, TEXT_BYTES, fit_result
from protocol import (
    DOMAIN_RESULT,
    MAX_ENVELOPE,
    MAX_SAMPLES,
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    GenerationStats,
    Measurement,
    Prompt,
    RequestRecord,
    Result,
    ResultBody,
    Stats,
    TaskSpec,
    derive,
)
from protocol.codec import decode, encode, pack_body
from protocol.framing import MAX_FRAME
from protocol.genstats import summarize_generation
from protocol.records import open_envelope, peer_id_from_public_key, public_key_of, seal
from protocol.stats import NO_SAMPLES
from scheduler import Refusal, check_figures

SEED = os.urandom(32)
WORKER = peer_id_from_public_key(public_key_of(SEED))
STATS = Stats(n=1, min=1, max=1, mean=1, median=1, stddev=0, p90=1, p95=1, p99=1, cv=0)
TENSOR = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=10)
REFERENCE = "the quick brown fox jumps over the lazy dog"
GENERATE = GenerateSpec(
    prompts=(Prompt(id="scored", text="Tell it.", reference=REFERENCE), Prompt(id="free", text="Go on.")),
    prompts_sha256="0" * 64, max_new_tokens=4096, quality=("rouge",),
)  # fmt: skip
WHITE_BOX = TaskSpec(compute_unit=ComputeUnit.CPU_TORCH, runs=1, load_runs=1, processes=1, generate=GENERATE)
ENDPOINT = TaskSpec(
    compute_unit=ComputeUnit.CPU_ONNX,
    generate=GENERATE.with_(endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"), concurrency=4),
)


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


def test_a_task_cannot_ask_for_more_samples_than_the_wire_carries() -> None:
    TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=MAX_SAMPLES // 4, processes=4)
    with pytest.raises(ValueError, match="timed runs per task"):
        TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=100_000, processes=3)
    with pytest.raises(ValueError, match="max_runs"):
        TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=10, processes=2, max_runs=MAX_SAMPLES)


def test_a_result_at_the_sample_limit_is_sealed_whole_and_travels_in_one_frame() -> None:
    body = _body(_measurement(MAX_SAMPLES))
    assert fit_result(body, TENSOR) is body  # nothing to cut
    received = _travels(body)
    assert len(received.measurement.samples_ms) == MAX_SAMPLES
    assert received.measurement.trimmed == ()


def test_a_result_that_cannot_fit_is_none_so_the_worker_reports_a_failure() -> None:
    assert fit_result(_body(_measurement(10)), TENSOR, limit=100) is None
    assert MAX_ENVELOPE < MAX_FRAME


def _record(i: int, tokens: int, words: int) -> RequestRecord:
    """Request `i`: every 10th failed with a long detail; even ones scored (a reference), odd ones not."""
    if i % 10 == 9:
        return RequestRecord(prompt_id="free", prompt_tokens=7, output_tokens=0, e2e_ms=3.0,
                             started_s=i * 0.01, error="server_error", error_detail="x" * 2000)  # fmt: skip
    ttft = 5.0 + i % 7
    times = [ttft]
    for j in range(1, tokens):
        times.append(times[-1] + 0.5 + (j % 5) * 0.125)  # gaps of 0.5 to 1.0 ms
    text = " ".join(REFERENCE.split()[(i + w) % 9] for w in range(words))  # a different score each
    return RequestRecord(prompt_id="scored" if i % 2 == 0 else "free", prompt_tokens=7, output_tokens=tokens,
                         ttft_ms=ttft, e2e_ms=times[-1], token_times_ms=tuple(times), output_text=text,
                         started_s=i * 0.01)  # fmt: skip


def _generate_body(requests: int, tokens: int, words: int, **changes: Any) -> ResultBody:
    """An honest white-box generate result, its figures derived as the worker derives them."""
    records = tuple(_record(i, tokens, words) for i in range(requests))
    records = tuple(r.with_(**changes) if i == 0 else r for i, r in enumerate(records))
    wall_s = max(r.started_s + r.e2e_ms / 1000 for r in records) + 0.1
    raw = _measurement(0).with_(
        compute_unit=ComputeUnit.CPU_TORCH, load_ms=NO_SAMPLES, inference_ms=NO_SAMPLES,
        samples_ms=tuple(r.e2e_ms for r in records), process_runs=(requests,), load_samples_ms=(900.0,),
        first_inferences_ms=(80.0,), generation=summarize_generation(records, wall_s, GENERATE),
    )  # fmt: skip
    return _body(derive(raw, WHITE_BOX))


def _checked(body: ResultBody) -> Measurement:
    """The submitter's reading of the body: its figures derived again; the test fails on a refusal."""
    checked = check_figures(body.measurement, WHITE_BOX)
    assert not isinstance(checked, Refusal), checked
    assert checked == body.measurement
    return checked


def _generation(m: Measurement) -> GenerationStats:
    assert m.generation is not None
    return m.generation


def test_a_huge_generation_result_is_cut_and_the_submitter_derives_the_same_figures() -> None:
    whole = _generate_body(300, 2048, 300)  # 5.5 MB of token times, 0.5 MB of texts
    fitted = fit_result(whole, WHITE_BOX)
    assert fitted is not None
    received = _travels(fitted)
    m = _checked(received)  # accepted: no `inconsistent`
    trimmed = m.trimmed
    print(f"\n{len(pack_body(whole))} bytes cut to {len(pack_body(fitted))}: {trimmed}")
    assert [t.split(" ")[0] for t in trimmed] == ["error_detail", "output_text", "token_times_ms"], trimmed
    assert "ITL from their gaps" in trimmed[2]
    before, after = _generation(whole.measurement), _generation(m)
    assert len(after.records) == 300
    assert m.samples_ms == whole.measurement.samples_ms
    assert m.process_runs == (300,)  # every request and count whole: the shape still fits the task
    for name in ("ttft_ms", "tpot_ms", "e2e_ms", "decode_tok_per_s", "output_tok_per_s", "rouge"):
        assert getattr(after, name) == getattr(before, name), name  # figures that read no cut part
    assert m.inference_ms == whole.measurement.inference_ms
    # ITL pools true gaps between tokens of the requests that kept their times: the same 0.5..1 ms
    # gaps, not gaps spanning k tokens as thinning every request's times would give.
    assert 0 < after.itl_ms.n < before.itl_ms.n
    assert (after.itl_ms.min, after.itl_ms.median, after.itl_ms.max) == (0.5, before.itl_ms.median, 1.0)
    assert after.itl_ms.mean == pytest.approx(before.itl_ms.mean, rel=1e-3)
    assert all(len(r.error_detail) <= DETAIL_CHARS for r in after.records)


def _roomy(body: ResultBody) -> int:
    """A limit with room for a few texts beside the bare records (1,100 bytes over them)."""
    return _bare(body) + 1_100


def _fit(body: ResultBody, limit: int) -> ResultBody:
    fitted = fit_result(body, WHITE_BOX, limit=limit)
    assert fitted is not None
    assert len(pack_body(fitted)) <= limit
    return fitted


def test_a_long_output_text_is_cut_to_what_the_wire_takes_and_rouge_scores_what_is_kept() -> None:
    whole = _generate_body(6, 10, 10, output_text="é" * 100_000)  # 200,000 bytes of UTF-8
    fitted = fit_result(whole, WHITE_BOX)
    assert fitted is not None
    m = _checked(_travels(fitted))
    assert len(_generation(m).records[0].output_text.encode()) <= TEXT_BYTES
    assert m.trimmed == (
        f"output_text cut to {TEXT_BYTES} bytes in 1 requests; ROUGE scores the shortened texts",
    )


def test_every_cut_is_declared_and_rouge_is_over_the_texts_kept() -> None:
    whole = _generate_body(60, 50, 60)
    fitted = _fit(whole, _roomy(whole))
    m = _checked(fitted)
    trimmed = m.trimmed
    print(f"\n{len(pack_body(whole))} bytes cut to {len(pack_body(fitted))}: {trimmed}")
    assert [t.split(" ")[0] for t in trimmed] == [
        "error_detail",
        "output_text",
        "token_times_ms",
        "output_text",
    ]
    assert "no ITL" in trimmed[2]  # no request's times fit beside the scored texts
    assert _generation(m).itl_ms.n == 0
    rouge = _generation(m).rouge
    kept = [r for r in _generation(m).records if r.prompt_id == "scored" and not r.text_dropped]
    assert rouge is not None
    assert 0 < rouge.scored == len(kept) < 30
    assert f"kept in {len(kept)} of the 30 scored requests; ROUGE over those {len(kept)} only" in trimmed[3]
    assert all(r.output_text == "" for r in _generation(m).records if r.text_dropped)


def _bare(body: ResultBody) -> int:
    """The packed size of the body with no text, no token time and short error details."""
    generation = _generation(body.measurement)
    records = tuple(
        r.with_(
            output_text="", text_dropped=True, token_times_ms=(), error_detail=r.error_detail[:DETAIL_CHARS]
        )
        for r in generation.records
    )
    return len(
        pack_body(
            body.with_(measurement=body.measurement.with_(generation=generation.with_(records=records)))
        )
    )


def test_a_result_with_room_for_no_scored_text_shows_no_rouge() -> None:
    whole = _generate_body(60, 50, 200)
    m = _checked(_fit(whole, _bare(whole) + 600))  # the notes take about 350 bytes, a text 1,000
    assert _generation(m).rouge is None
    assert "no ROUGE: no scored text left" in m.trimmed[-1], m.trimmed


def test_figures_changed_after_the_cut_are_still_refused_inconsistent() -> None:
    whole = _generate_body(60, 50, 60)
    fitted = _fit(whole, _roomy(whole)).measurement
    generation = _generation(fitted)
    assert generation.rouge is not None
    tampered = {
        "itl_ms": fitted.with_(generation=generation.with_(itl_ms=generation.itl_ms.with_(median=0.1))),
        "rouge": fitted.with_(generation=generation.with_(rouge=generation.rouge.with_(rouge1=0.99))),
        # the whole run's figures beside the cut records: what the worker sent before the cut re-derived
        "whole figures": fitted.with_(
            generation=_generation(whole.measurement).with_(records=generation.records)
        ),
    }
    for name, m in tampered.items():
        refusal = check_figures(m, WHITE_BOX)
        assert isinstance(refusal, Refusal), name
        assert refusal.reason is FailureReason.INCONSISTENT, (name, refusal)


def test_a_record_that_says_its_text_was_dropped_but_carries_one_is_invalid() -> None:
    fitted = _fit(_generate_body(60, 50, 60), _roomy(_generate_body(60, 50, 60))).measurement
    generation = _generation(fitted)
    i = next(i for i, r in enumerate(generation.records) if r.text_dropped)
    records = list(generation.records)
    records[i] = records[i].with_(output_text="the quick brown fox")
    refusal = check_figures(fitted.with_(generation=generation.with_(records=tuple(records))), WHITE_BOX)
    assert isinstance(refusal, Refusal)
    assert refusal.reason is FailureReason.INVALID
    assert "says it was dropped" in refusal.detail


def test_a_cut_endpoint_result_passes_the_check_too() -> None:
    body = _generate_body(60, 50, 200)
    assert ENDPOINT.generate is not None
    generation = _generation(body.measurement)
    raw = _measurement(0).with_(
        warmups_used=0,
        generation=summarize_generation(generation.records, generation.wall_s, ENDPOINT.generate).with_(
            rtt_ms=0.4
        ),
    )
    whole = body.with_(measurement=derive(raw, ENDPOINT))
    fitted = fit_result(whole, ENDPOINT, limit=len(pack_body(whole)) // 2)
    assert fitted is not None
    assert len(fitted.measurement.trimmed) >= 2
    assert check_figures(fitted.measurement, ENDPOINT) == fitted.measurement
