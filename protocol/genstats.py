"""The aggregate of a generate run: per-request records in, `GenerationStats` out, as `FORMULAS` says.

Pure: no clock, no runtime. Every figure is computed from the raw `RequestRecord`s, which the result
keeps, so any other definition can be recomputed later, and the submitter recomputes these ones with
the same functions (`protocol.aggregate`).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Sequence

from protocol import rouge
from protocol.clientload import client_load
from protocol.generation import MAX_RECORDS, GenerateSpec, GenerationStats, RequestRecord, Rouge, Slo
from protocol.sessions import by_turn, sessions_of
from protocol.stats import median, summarize


def tpot_ms(record: RequestRecord) -> float | None:
    """(e2e - ttft) / (output_tokens - 1), or None with fewer than 2 output tokens or no TTFT."""
    if record.ttft_ms is None or record.output_tokens < 2:
        return None
    return (record.e2e_ms - record.ttft_ms) / (record.output_tokens - 1)


def gaps_ms(record: RequestRecord) -> list[float]:
    """Every gap between consecutive output tokens of one request."""
    times = record.token_times_ms
    return [b - a for a, b in itertools.pairwise(times)]


def _prefill(record: RequestRecord) -> float | None:
    if record.ttft_ms is None or record.ttft_ms <= 0:
        return None
    return record.prompt_tokens / (record.ttft_ms / 1000)


def _decode(record: RequestRecord) -> float | None:
    if record.ttft_ms is None or record.output_tokens < 2 or record.e2e_ms <= record.ttft_ms:
        return None
    return (record.output_tokens - 1) / ((record.e2e_ms - record.ttft_ms) / 1000)


def token_source(record: RequestRecord) -> str:
    """How the record's output tokens were counted (a record from before issue 24 says only whether)."""
    if record.token_source:
        return record.token_source
    return "chunks" if record.tokens_counted else "server-usage"


def _policy(ok: Sequence[RequestRecord]) -> dict[str, object]:
    """The declared measurement policy of the successful requests (`FORMULAS`: token_source and after)."""
    sources = sorted({token_source(r) for r in ok})
    per_chunk = [r.output_tokens / r.chunks for r in ok if r.chunks > 0]
    both = [(r.usage_tokens, r.counted_tokens) for r in ok if r.usage_tokens is not None]
    pairs = [(u, c) for u, c in both if c is not None]
    counted = sum(c for _, c in pairs)
    ttfo = [r.ttfo_ms for r in ok if r.ttfo_ms is not None]
    return {
        "token_source": ";".join(sources),
        "tokens_per_chunk_mean": sum(per_chunk) / len(per_chunk) if per_chunk else None,
        "usage_vs_counted_pct": 100 * (sum(u for u, _ in pairs) - counted) / counted if counted else None,
        "ttfo_ms": summarize(ttfo) if ttfo else None,
        "reasoning_tokens_mean": sum(r.reasoning_tokens for r in ok) / len(ok) if ok else 0.0,
    }


def _median_or_zero(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None]
    return median(present) if present else 0.0


def score_rouge(records: Sequence[RequestRecord], spec: GenerateSpec) -> Rouge | None:
    """ROUGE-1/2/L F1 averaged over successful requests whose prompt has a reference and whose text
    the result kept; None if not asked, or if every such text was dropped to fit (nothing to score)."""
    if "rouge" not in spec.quality:
        return None
    references = {p.id: p.reference for p in spec.prompts if p.reference}
    # a session's later turns answer other questions than the reference's: only first turns are scored
    scorable = [r for r in records if r.error is None and r.prompt_id in references and (r.turn or 1) == 1]
    kept = [r for r in scorable if not r.text_dropped]
    if scorable and not kept:
        return None
    scores = [rouge.score(r.output_text, references[r.prompt_id]) for r in kept]
    if not scores:
        return Rouge(rouge1=0.0, rouge2=0.0, rouge_l=0.0, scored=0)
    n = len(scores)
    return Rouge(
        rouge1=sum(s.rouge1 for s in scores) / n,
        rouge2=sum(s.rouge2 for s in scores) / n,
        rouge_l=sum(s.rouge_l for s in scores) / n,
        scored=n,
    )


def outputs_fingerprint(records: Sequence[RequestRecord]) -> str:
    """A greedy generation's outputs fingerprint, as replicas of one class compare it: `sha256:` over
    each prompt's output texts (by prompt id; a prompt answered twice differently keeps both), the
    records whose text was dropped to fit an envelope left out ("" when no text is left). Greedy
    decoding of one model on one class gives the same token ids, hence the same text; a worker that
    never ran the model, or ran another, cannot give them. Derived by the submitter from the raw
    records, not the worker's word."""
    texts: dict[str, set[str]] = {}
    for r in records:
        if r.error is None and not r.text_dropped:
            texts.setdefault(r.prompt_id, set()).add(r.output_text)
    if not texts:
        return ""
    digest = hashlib.sha256()
    for prompt_id in sorted(texts):
        for text in sorted(texts[prompt_id]):
            digest.update(prompt_id.encode() + b"\0" + text.encode() + b"\0")
    return "sha256:" + digest.hexdigest()


def meets_slo(r: RequestRecord, slo: Slo) -> bool:
    """Whether one request succeeded and met every SLO that is set (what goodput counts)."""
    tpot = tpot_ms(r)
    return (
        r.error is None
        and (slo.ttft_ms is None or (r.ttft_ms is not None and r.ttft_ms <= slo.ttft_ms))
        and (slo.tpot_ms is None or (tpot is not None and tpot <= slo.tpot_ms))
        and (slo.e2e_ms is None or r.e2e_ms <= slo.e2e_ms)
    )


def _goodput(records: Sequence[RequestRecord], spec: GenerateSpec) -> float | None:
    slo = spec.slo
    if not records or (slo.ttft_ms is None and slo.tpot_ms is None and slo.e2e_ms is None):
        return None
    return sum(1 for r in records if meets_slo(r, slo)) / len(records)


def summarize_generation(
    records: Sequence[RequestRecord],
    wall_s: float,
    spec: GenerateSpec,
    *,
    cpu_pct: float | None = None,
    unsent: int = 0,
) -> GenerationStats:
    """The run's aggregate, each figure as `protocol.FORMULAS` defines it; the raw records kept.

    Args:
        records: every request of the run, failed ones included.
        wall_s: the run's wall time in seconds (first request sent to last token), for the rates.
        spec: what was asked (quality metrics, SLOs, concurrency).
        cpu_pct: an endpoint client's CPU over the run (% of one core), kept and judged.
        unsent: an open loop's planned sends that its deadline came before.

    Returns:
        The protocol's `GenerationStats`.
    """
    ok = [r for r in records if r.error is None]
    output_total = sum(r.output_tokens for r in ok)
    client = client_load(records, spec, cpu_pct, unsent)
    return GenerationStats(
        requests=len(records),
        errors=len(records) - len(ok),
        requests_sent=sum(r.attempts for r in records),
        errors_by_kind=dict(Counter(str(r.error) for r in records if r.error is not None)),
        wall_s=wall_s,
        concurrency=spec.concurrency,
        request_rate=spec.request_rate,
        ttft_ms=summarize([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        tpot_ms=summarize([t for r in ok if (t := tpot_ms(r)) is not None]),
        itl_ms=summarize([g for r in ok for g in gaps_ms(r)]),
        e2e_ms=summarize([r.e2e_ms for r in ok]),
        prompt_tokens_mean=sum(r.prompt_tokens for r in ok) / len(ok) if ok else 0.0,
        output_tokens_mean=output_total / len(ok) if ok else 0.0,
        prefill_tok_per_s=_median_or_zero([_prefill(r) for r in ok]),
        decode_tok_per_s=_median_or_zero([_decode(r) for r in ok]),
        output_tok_per_s=output_total / wall_s if wall_s > 0 else 0.0,
        request_per_s=_request_per_s(ok, wall_s, spec),
        goodput=_goodput(records, spec),
        tokens_counted=any(r.tokens_counted for r in records),
        dataset_seed=spec.dataset_seed,
        rouge=score_rouge(records, spec),
        records=tuple(records[:MAX_RECORDS]),
        client_cpu_pct=cpu_pct,
        unsent=unsent,
        schedule_span_s=client.span_s,
        request_rate_achieved=client.rate_achieved,
        schedule_lag_ms_p50=client.lag_p50_ms,
        schedule_lag_ms_p99=client.lag_p99_ms,
        client_saturated=client.saturated,
        client_saturated_reason=client.reason,
        by_turn=by_turn(records),
        sessions=sessions_of(records, spec),
        **_policy(ok),
    )


def _request_per_s(ok: Sequence[RequestRecord], wall_s: float, spec: GenerateSpec) -> float:
    """`FORMULAS["request_per_s"]`: a timed run over its own duration, not the tail after it."""
    if spec.duration_s:
        return sum(1 for r in ok if r.started_s <= spec.duration_s) / spec.duration_s
    return len(ok) / wall_s if wall_s > 0 else 0.0
