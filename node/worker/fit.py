"""Fitting a result into one signed envelope: what is cut, in a fixed order, always declared, and every
figure derived again from what is kept.

A tensor task's samples always fit: `TaskSpec` bounds runs x processes by `MAX_SAMPLES`, and a result
at that bound packs to about 2.3 MiB of an envelope's `MAX_ENVELOPE` (4 MiB less 64 KiB), so nothing
of a tensor result is ever cut (thinning its samples would break `process_runs` and every figure
derived from them). A generate task can outgrow it (2,000 prompts of 32,768 tokens each carry 65
million token times), and a long output text outgrows the wire's string cap. So, before signing,
the worker cuts in this order, each step only while the result is still too large, and names every
cut in `Measurement.trimmed` (shown in the result's row):

1. output texts longer than the wire takes (`MAX_STR_LEN` bytes) are shortened (always); ROUGE
   scores the shortened texts;
2. error details are shortened (no figure reads them);
3. the output texts that no figure scores are dropped (all of them when the task asks no ROUGE);
4. token times are kept in 1 request in k only (every time of those requests): ITL pools the true
   gaps between tokens of the requests that kept theirs (thinning every request's times to 1 in k
   would make each gap span k tokens);
5. the scored output texts are kept in 1 request in k only (`RequestRecord.text_dropped` marks the
   others): ROUGE averages the requests that kept theirs, and is absent when none did.

Every count (tokens, requests, end-to-end times) stays whole. The rule: every figure a cut result
shows is derived from the records it carries. After cutting, the worker calls `protocol.derive` on
what it kept, so the submitter's check (`scheduler.check_figures`) derives the same figures again.
What still does not fit is `None`: the worker (`node.worker.job.signed_result`) reports the task
failed `too_large` instead of sealing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Final

from protocol import MAX_ENVELOPE, Measurement, RequestRecord, ResultBody, TaskSpec, derive
from protocol.codec import MAX_STR_LEN, pack_body

log = logging.getLogger(__name__)

TEXT_BYTES: Final = MAX_STR_LEN - 64
"""The longest output text kept, in UTF-8 bytes (the wire refuses longer strings)."""
DETAIL_CHARS: Final = 200
"""The longest error detail kept once details must be cut."""

Change = Callable[[RequestRecord], RequestRecord]
Step = Callable[[ResultBody, TaskSpec, int, int], ResultBody]  # body, spec, its packed size, limit


def fit_result(body: ResultBody, spec: TaskSpec, limit: int = MAX_ENVELOPE) -> ResultBody | None:
    """The body as it is if it packs to at most `limit` bytes, else cut as the module says with its
    figures derived again from what is kept (`spec` is the task's), or None if it cannot fit."""
    candidate = body.with_(measurement=_shorten_texts(body.measurement, spec))
    steps: tuple[Step, ...] = (_shorten_details, _drop_unscored_texts, _sample_token_times, _sample_texts)
    size = len(pack_body(candidate))
    for step in steps:
        if size <= limit:
            break
        candidate = step(candidate, spec, size, limit)
        size = len(pack_body(candidate))
    m = candidate.measurement
    if m.trimmed:
        candidate = candidate.with_(measurement=derive(m, spec))  # the figures of what is kept
        size = len(pack_body(candidate))
    if size > limit:
        return None
    if not m.trimmed:
        return body
    log.info("result of %s cut to fit: %s", body.task_id, "; ".join(m.trimmed))
    return candidate


def _declared(m: Measurement, note: str, change: Change, indexes: Sequence[int]) -> Measurement:
    """`m` with `change` applied to the records at `indexes` and the cut named in `trimmed`."""
    assert m.generation is not None
    records = list(m.generation.records)
    for i in indexes:
        records[i] = change(records[i])
    generation = m.generation.with_(records=tuple(records))
    return m.with_(trimmed=(*m.trimmed, note)[-8:], generation=generation)


def _indexes(m: Measurement, keep: Callable[[RequestRecord], bool]) -> list[int]:
    records = () if m.generation is None else m.generation.records
    return [i for i, r in enumerate(records) if keep(r)]


def _scored(spec: TaskSpec) -> Callable[[RequestRecord], bool]:
    """Whether ROUGE scores a request's output text (as `protocol.genstats.score_rouge` picks them)."""
    generate = spec.generate
    if generate is None or "rouge" not in generate.quality:
        return lambda r: False
    references = {p.id for p in generate.prompts if p.reference}
    return lambda r: r.error is None and r.prompt_id in references


def _shorten_texts(m: Measurement, spec: TaskSpec) -> Measurement:
    long = _indexes(m, lambda r: len(r.output_text.encode()) > TEXT_BYTES)
    if not long:
        return m
    scored = _indexes(m, _scored(spec))
    rouge = "; ROUGE scores the shortened texts" if set(long) & set(scored) else ""
    note = f"output_text cut to {TEXT_BYTES} bytes in {len(long)} requests{rouge}"

    def cut(r: RequestRecord) -> RequestRecord:
        return r.with_(output_text=r.output_text.encode()[:TEXT_BYTES].decode(errors="ignore"))

    return _declared(m, note, cut, long)


def _shorten_details(body: ResultBody, spec: TaskSpec, size: int, limit: int) -> ResultBody:
    m = body.measurement
    long = _indexes(m, lambda r: len(r.error_detail) > DETAIL_CHARS)
    if not long:
        return body
    note = f"error_detail cut to {DETAIL_CHARS} characters in {len(long)} requests"
    m = _declared(m, note, lambda r: r.with_(error_detail=r.error_detail[:DETAIL_CHARS]), long)
    return body.with_(measurement=m)


def _drop_unscored_texts(body: ResultBody, spec: TaskSpec, size: int, limit: int) -> ResultBody:
    scored = _scored(spec)
    unscored = _indexes(body.measurement, lambda r: bool(r.output_text) and not scored(r))
    if not unscored:
        return body
    note = f"output_text dropped from the {len(unscored)} requests that no figure scores"
    m = _declared(body.measurement, note, lambda r: r.with_(output_text="", text_dropped=True), unscored)
    return body.with_(measurement=m)


def _sample_token_times(body: ResultBody, spec: TaskSpec, size: int, limit: int) -> ResultBody:
    def cut(k: int, candidates: list[int]) -> str:
        if not k:
            return f"token_times_ms dropped from all {len(candidates)} requests; no ITL (zeros)"
        kept = len(candidates[::k])
        return f"token_times_ms kept in 1 request in {k} ({kept} of {len(candidates)}); ITL from their gaps"

    def drop(r: RequestRecord) -> RequestRecord:
        return r.with_(token_times_ms=())

    return _sample(body, size, limit, lambda r: bool(r.token_times_ms), drop, cut)


def _sample_texts(body: ResultBody, spec: TaskSpec, size: int, limit: int) -> ResultBody:
    scored = _scored(spec)

    def cut(k: int, candidates: list[int]) -> str:
        kept = len(candidates[::k]) if k else 0
        rouge = f"ROUGE over those {kept} only" if kept else "no ROUGE: no scored text left"
        return f"output_text kept in {kept} of the {len(candidates)} scored requests; {rouge}"

    def drop(r: RequestRecord) -> RequestRecord:
        return r.with_(output_text="", text_dropped=True)

    return _sample(body, size, limit, lambda r: scored(r) and not r.text_dropped, drop, cut)


def _sample(
    body: ResultBody,
    size: int,
    limit: int,
    has: Callable[[RequestRecord], bool],
    drop: Change,
    note: Callable[[int, list[int]], str],
) -> ResultBody:
    """`body` with `drop` applied to all but 1 in k of the records that `has` the part, the smallest
    k (estimated from the sizes, then doubled) that fits, or every one of them when none does; k = 0
    in `note` means none kept."""
    candidates = _indexes(body.measurement, has)
    if not candidates:
        return body
    k = max(2, math.ceil(size / limit * 1.1))
    while k <= len(candidates):
        cut = set(candidates) - set(candidates[::k])
        trimmed = body.with_(measurement=_declared(body.measurement, note(k, candidates), drop, sorted(cut)))
        if len(pack_body(trimmed)) <= limit:
            return trimmed
        k *= 2
    return body.with_(measurement=_declared(body.measurement, note(0, candidates), drop, candidates))


__all__ = ["DETAIL_CHARS", "TEXT_BYTES", "fit_result"]
