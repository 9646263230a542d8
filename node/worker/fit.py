"""Fitting a result into one signed envelope: what is cut, in a fixed order, and always declared.

A tensor task's samples always fit: `TaskSpec` bounds runs x processes by `MAX_SAMPLES`, and a result
at that bound packs to about 2.3 MiB of an envelope's `MAX_ENVELOPE` (4 MiB less 64 KiB). A generate
task can outgrow it (2,000 prompts of 32,768 tokens each carry 65 million token times), and a long
output text outgrows the wire's string cap. So, before signing, the worker cuts in this order, each
step only while the result is still too large, and names every cut in `Measurement.trimmed` (shown
in the result's row):

1. output texts longer than the wire takes (`MAX_STR_LEN` bytes) are shortened (always);
2. output texts are dropped (ROUGE, computed by the worker on the whole texts, is kept);
3. each request's token times are thinned to every k-th, keeping the last (the counts stay whole);
4. the raw samples are thinned to every k-th.

What still does not fit is `None`: the runner reports the task failed `too_large` instead of sealing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Final

from protocol import MAX_ENVELOPE, Measurement, RequestRecord, ResultBody
from protocol.codec import MAX_STR_LEN, pack_body

log = logging.getLogger(__name__)

TEXT_BYTES: Final = MAX_STR_LEN - 64
"""The longest output text kept, in UTF-8 bytes (the wire refuses longer strings)."""


def fit_result(body: ResultBody, limit: int = MAX_ENVELOPE) -> ResultBody | None:
    """The body as it is if it packs to at most `limit` bytes, else cut as the module says, or None."""
    m = _shorten_texts(body.measurement)
    candidate = body if m is body.measurement else body.with_(measurement=m)
    size = len(pack_body(candidate))
    for step in (_drop_texts, _thin_token_times, _thin_samples):
        if size <= limit:
            break
        candidate = candidate.with_(measurement=step(candidate.measurement, size, limit))
        size = len(pack_body(candidate))
    if size > limit:
        return None
    if candidate.measurement.trimmed:
        log.info("result of %s cut to fit: %s", body.task_id, "; ".join(candidate.measurement.trimmed))
    return candidate


def _declared(m: Measurement, note: str, **changes: object) -> Measurement:
    return m.with_(trimmed=(*m.trimmed, note)[-8:], **changes)


def _records(m: Measurement, change: Callable[[RequestRecord], RequestRecord], note: str) -> Measurement:
    if m.generation is None or not m.generation.records:
        return m
    records = tuple(change(r) for r in m.generation.records)
    return _declared(m, note, generation=m.generation.with_(records=records))


def _shorten_texts(m: Measurement) -> Measurement:
    if m.generation is None or all(len(r.output_text.encode()) <= TEXT_BYTES for r in m.generation.records):
        return m
    long = sum(len(r.output_text.encode()) > TEXT_BYTES for r in m.generation.records)

    def cut(r: RequestRecord) -> RequestRecord:
        text = r.output_text.encode()[:TEXT_BYTES].decode(errors="ignore")
        return r if text == r.output_text else r.with_(output_text=text)

    return _records(m, cut, f"output_text cut to {TEXT_BYTES} bytes in {long} requests")


def _drop_texts(m: Measurement, size: int, limit: int) -> Measurement:
    note = f"output_text dropped from every request (result of {size} bytes, limit {limit})"
    return _records(m, lambda r: r.with_(output_text=""), note)


def _every_kth(values: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Every k-th value, the last one always kept."""
    if k <= 1 or len(values) <= 1:
        return values
    kept = values[k - 1 :: k]
    return kept if len(values) % k == 0 else (*kept, values[-1])


def _thin_token_times(m: Measurement, size: int, limit: int) -> Measurement:
    if m.generation is None:
        return m
    times = sum(len(r.token_times_ms) for r in m.generation.records)
    if not times:
        return m
    k = math.ceil(size / limit * 1.1) + 1  # token times dominate a result this large
    note = f"token_times_ms thinned: 1 in {k} kept of {times} (result of {size} bytes, limit {limit})"
    return _records(m, lambda r: r.with_(token_times_ms=_every_kth(r.token_times_ms, k)), note)


def _thin_samples(m: Measurement, size: int, limit: int) -> Measurement:
    if len(m.samples_ms) <= 1:
        return m
    k = math.ceil(size / limit * 1.1) + 1
    kept = _every_kth(m.samples_ms, k)
    note = f"samples_ms thinned: {len(kept)} of {len(m.samples_ms)} kept, 1 in {k} (result of {size} bytes)"
    return _declared(m, note, samples_ms=kept)


__all__ = ["TEXT_BYTES", "fit_result"]
