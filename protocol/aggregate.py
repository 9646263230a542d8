"""A measurement's figures from its raw parts: the one computation the worker and the submitter share.

The worker measures raw parts (the timed samples and how many each process took, every timed load,
each process's first inference, every request's record and the run's wall time) and `derive`
computes every figure that rows and reports show from them. The submitter calls `derive` again on
the signed result and compares (`scheduler.verification.figures`), so a figure that its own samples contradict
is refused rather than shown. Single readings (peak memory, CPU and GPU use, background load, round
trip) have no raw parts: they are taken as measured, within sane bounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final

from protocol.capacity import derive_capacity, headline
from protocol.energy import energy_figures
from protocol.generation import GenerateSpec, GenerationStats, RequestRecord, RuntimeRates
from protocol.genstats import summarize_generation, tpot_ms
from protocol.stats import NO_SAMPLES, instability, median, split, spread_pct, summarize
from protocol.values import BANDWIDTHS, Measurement, PeakRun, TaskSpec
from protocol.windows import sustained

TIMER_TOL: Final = 1e-9  # a runtime's timer and the harness's clock rounded apart (ms)


def is_endpoint(spec: TaskSpec) -> bool:
    """Whether the task drives a model server (no load, no process: every figure is per request)."""
    return spec.generate is not None and spec.generate.endpoint is not None


def derive_generation(stats: GenerationStats, spec: GenerateSpec) -> GenerationStats:
    """A generate run's aggregate recomputed from its records and wall time, its readings kept (a
    runtime's own timers only where they fit the records: `runtime_rates_fit`)."""
    rates = stats.runtime_rates
    return summarize_generation(
        stats.records, stats.wall_s, spec, cpu_pct=stats.client_cpu_pct, unsent=stats.unsent
    ).with_(
        rtt_ms=stats.rtt_ms,
        tls_ms=stats.tls_ms,
        client_overhead_ms=stats.client_overhead_ms,
        runtime_rates=rates if rates is not None and runtime_rates_fit(rates, stats.records) else None,
    )


def runtime_rates_fit(rates: RuntimeRates, records: Sequence[RequestRecord]) -> bool:
    """Whether a runtime's own timers can be those of these timed requests: every token it evaluated
    is one of theirs (each request's prompt, and each output token but the last fed back; llama.cpp
    counts a one-token batch as generation, so only the total is exact), and its evaluation time lies
    within their end-to-end times."""
    tokens = sum(r.prompt_tokens + max(r.output_tokens - 1, 0) for r in records if r.error is None)
    spent_ms = sum(r.e2e_ms for r in records if r.error is None)
    within = rates.prompt_ms + rates.eval_ms <= spent_ms * (1 + TIMER_TOL) + TIMER_TOL
    return rates.prompt_tokens + rates.eval_tokens == tokens and within


def per_token_instability(
    generation: GenerationStats, process_runs: Sequence[int], background_cores: float
) -> tuple[str, ...]:
    """A generation's stability, judged on its requests' TPOT (per-process medians included).

    End-to-end times grow with each answer's length, which differs by prompt: judged on them, every
    generation would be "unstable". Time per output token is what should repeat.
    """
    tpots: list[list[float]] = []
    start = 0
    for count in process_runs:
        tpots.append([t for r in generation.records[start : start + count] if (t := tpot_ms(r)) is not None])
        start += count
    medians = [median(part) for part in tpots if part]
    return instability(summarize([t for part in tpots for t in part]), medians, background_cores, of="TPOT")


FASTEST_FLOOR_S: Final = 1e-9  # a timed call's least seconds a rate divides by


def peak_work(precision: str, size: int, batch: int) -> float:
    """The work of one timed call of a peaks kernel (`FORMULAS` peak_gops, peak_gbs): a matmul's
    2 n^3 operations per n x n product, memory's bytes (a copy's read plus written), x `batch`."""
    if precision in BANDWIDTHS:
        return float(batch * size * (2 if precision == "copy" else 1))
    return float(batch) * 2.0 * float(size) ** 3


def derive_peak(run: PeakRun) -> PeakRun:
    """A peaks task's figure from its raw parts: `per_s` is one call's work at `size` over the
    fastest timed call (in G per second), `cv` the timed calls' spread; an unavailable figure has none."""
    if not run.peak.available or not run.times_s:
        return run.with_(peak=run.peak.with_(per_s=0.0, cv=0.0))
    fastest = max(min(run.times_s), FASTEST_FLOOR_S)
    per_s = peak_work(run.peak.precision, run.size, run.batch) / fastest / 1e9
    mean = statistics.fmean(run.times_s)
    cv = statistics.pstdev(run.times_s) / mean if mean > 0 else 0.0
    return run.with_(peak=run.peak.with_(per_s=per_s, cv=round(cv, 4)))


def derive(m: Measurement, spec: TaskSpec) -> Measurement:
    """`m` with every figure computed from its raw parts, as `spec` asked for them.

    A tensor or white-box generate task: the inference statistics are over all samples (a generate
    task's are its requests' end-to-end times), their median the median of the process medians;
    loads, first loads and first inferences come from the raw ones, the stability verdict from
    those, the background load and a throughput run its timed runs cannot give (its figure withheld:
    `Measurement.async_over`; a generate task's from its requests' TPOT instead:
    `per_token_instability`). An endpoint task: its requests' end-to-end latency is its
    inference figure; a capacity search's levels are derived again and the search replayed
    (`protocol.capacity.derive_capacity`), its generation figures the knee level's. The raw parts
    must fit together (`scheduler.verification.figures` checks that first): one count per process adding up to
    the samples, `spec.load_runs` loads per process, one first inference per process,
    generation figures exactly when `spec.generate` is set. Energy figures come from the
    processes' energy readings over the same runs or requests (`protocol.energy`).
    """
    if is_endpoint(spec):
        return _derive_endpoint(m, spec)
    if spec.peaks is not None and m.peak_run is not None:
        return _derive_peaks(m, spec, m.peak_run)
    generation = m.generation
    if spec.generate is not None and generation is not None:
        generation = derive_generation(generation, spec.generate)
    samples = m.samples_ms if generation is None else tuple(r.e2e_ms for r in generation.records)
    medians = tuple(median(part) for part in split(samples, m.process_runs))
    inference = summarize(samples).with_(median=median(medians))
    loads = split(m.load_samples_ms, [spec.load_runs] * len(m.process_runs))
    reasons = (
        (*instability(inference, medians, m.conditions.background_cores), *m.async_over())
        if generation is None
        else per_token_instability(generation, m.process_runs, m.conditions.background_cores)
    )
    windows = None
    if spec.sustain is not None:
        points = m.telemetry.points if m.telemetry is not None else ()
        windows = sustained(samples, m.mark_runs, m.mark_ms, points, spec.sustain.window_s)
    return m.with_(
        compute_unit=spec.compute_unit,
        load_ms=summarize(m.load_samples_ms),
        load_first_ms=median([part[0] for part in loads]),
        first_inference_ms=median(m.first_inferences_ms),
        inference_ms=inference,
        samples_ms=samples,
        process_medians_ms=medians,
        process_spread_pct=spread_pct(medians),
        unstable=bool(reasons),
        unstable_reasons=reasons,
        generation=generation,
        energy=energy_figures(
            m.energy_readings, m.process_runs, None if generation is None else generation.records
        ),
        sustained=windows,
    )


def _derive_endpoint(m: Measurement, spec: TaskSpec) -> Measurement:
    """An endpoint task's figures: its requests' end-to-end latency is the inference figure; a
    capacity search's levels are derived again and the search replayed."""
    assert spec.generate is not None
    assert m.generation is not None
    generation, capacity = derive_generation(m.generation, spec.generate), m.capacity
    if spec.generate.capacity is not None and capacity is not None:
        capacity = derive_capacity(capacity, spec.generate)
        generation = headline(capacity) or generation
    return m.with_(
        compute_unit=spec.compute_unit,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=generation.ttft_ms.median,
        inference_ms=generation.e2e_ms,
        process_medians_ms=(),
        process_spread_pct=0.0,
        unstable=False,
        unstable_reasons=(),
        generation=generation,
        capacity=capacity,
        energy=energy_figures(m.energy_readings, (), generation.records),
        sustained=None,
    )


def _derive_peaks(m: Measurement, spec: TaskSpec, run: PeakRun) -> Measurement:
    """A peaks task's measurement: its figure derived again (`derive_peak`); it times no model, so
    every inference and load figure is empty."""
    return Measurement.nothing_timed(spec.compute_unit).with_(
        warmups_used=m.warmups_used,
        cpu_cores_used=m.cpu_cores_used,
        conditions=m.conditions,
        trimmed=m.trimmed,
        peak_run=derive_peak(run),
    )
