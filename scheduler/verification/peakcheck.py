"""A peaks task's result (`TaskSpec.peaks`) held to its task and to its worker's challenged calibration.

A peaks task measures one figure of the unit's peaks (a matmul's GFLOPS at a precision, or a memory
bandwidth) and sends its raw parts (`protocol.PeakRun`): the size the figure is from, the products one
timed call batches, every timed call's seconds. The submitter derives the figure again from them
(`protocol.aggregate.derive_peak`: one call's work at that size over the fastest call), so a figure its
own timings contradict is refused `inconsistent` by `figures.check_figures` like any other.

What the cheater sees and chooses: every number it sends, the timings included; so the re-derivation
only stops a figure that does not follow from its parts. Refused here as `invalid` (`peak_problems`):

- parts that cannot be this task's: a figure of another precision or unit kind (a CPU unit's figure
  is `CPU`'s, `GPU (PyTorch)`'s a `cuda:<i>` device's), a batch the kernel does not run (1 on a CPU,
  `GPU_PEAK_BATCH` on a GPU: the cheater cannot multiply its work by choosing it), a size past the
  task's `largest`, fewer than `PEAK_MIN_REPEATS` timed calls, a call of no time, calls longer in all
  than the task's timeout, a model's figures (samples, loads, requests) in a peaks result, a peak in
  another task's, an unavailable figure (the worker sends that as the task's failure, with why);
- a figure past physics on the worker's profile (`claims`: fp32 at most `MAX_GFLOPS_PER_CORE` a logical
  core, a narrower precision `PRECISION_RATIO` times that, memory `MAX_COPY_GBS`, a GPU's within
  `MAX_GPU_TFLOPS` and only on a profile listing a GPU);
- a figure over what the worker's calibration allows, where the calibration was taken on a quiet
  machine (`Calibration.quiet`): the figure is put in place of that unit and precision's among the
  profile's peaks and held to `claims.peak_problems` (fp32 at most `PEAK_FACTOR` x `cpu_gflops`,
  memory at most that x the calibration's copy, a narrower precision at most `PRECISION_RATIO` x
  fp32). The calibration is the advert's, which the CPU challenge measures at the claim's word
  (`Calibration.cpu_claim`) when the campaign challenges; the class's median is held against the
  advertised peaks at discovery (`claims.claim_problems`), and `verify: {replicas: N}` places the same
  figure on N peers of one class. A calibration taken under load is no ceiling (an honest worker
  calibrated beside other work measured 6.7 GFLOPS and then a 150 GFLOPS fp32 peak on this 2-core
  machine): there only physics bounds the figure. The cheater chooses that mark too, so a worker
  whose advert says "loaded" is bounded by physics alone; its class and replicas are what remain.

A figure inflated within those bounds is not caught by this check alone: that is the bound's width.
"""

from __future__ import annotations

from collections.abc import Iterator

from protocol import GPU_PEAK_BATCH, PEAK_MIN_REPEATS, DeviceProfile, Measurement, PeakRun, TaskSpec
from protocol.aggregate import derive_peak
from protocol.values import BANDWIDTHS
from scheduler.language.peaks import peak_unit_kind
from scheduler.verification.claims import (
    MAX_COPY_GBS,
    MAX_GFLOPS_PER_CORE,
    MAX_GPU_TFLOPS,
    PRECISION_RATIO,
    peak_problems,
)

MIB = 1 << 20


def peak_parts(
    m: Measurement, spec: TaskSpec, profile: DeviceProfile | None, limit_s: float
) -> Iterator[str]:
    """Every reason a peaks result cannot be this task's or be believed (module docstring)."""
    run = m.peak_run
    if (spec.peaks is None) != (run is None):
        yield "peak_run: a peaks figure for a model's task, or none for a peaks task"
        return
    if run is None or spec.peaks is None:
        return
    raw = {
        "samples_ms": m.samples_ms, "process_runs": m.process_runs, "load_samples_ms": m.load_samples_ms,
        "first_inferences_ms": m.first_inferences_ms, "energy_readings": m.energy_readings,
    }  # fmt: skip
    extra = [name for name, values in raw.items() if values]
    extra += [name for name in ("generation", "capacity") if getattr(m, name) is not None]
    if extra:
        yield f"{', '.join(extra)}: a model's figures in a peaks result"
        return
    shape = list(_run_shape(run, spec))
    for i, value in enumerate(run.times_s):
        if value <= 0:
            shape.append(f"peak_run.times_s[{i}]: a timed call of {value!r} s")
            break
    if sum(run.times_s) > limit_s:
        shape.append(f"peak_run.times_s: {sum(run.times_s):.6g} s of timed calls, past the task's timeout")
    yield from shape
    if not shape and profile is not None:
        yield from _believed(derive_peak(run), profile)  # the figure as derived, never as stated


def _run_shape(run: PeakRun, spec: TaskSpec) -> Iterator[str]:
    assert spec.peaks is not None
    peak, want = run.peak, spec.peaks.precision
    if peak.precision != want:
        yield f"peak_run.peak.precision: {peak.precision}, the task asked for {want}"
    gpu = peak_unit_kind(spec.compute_unit) == "gpu"
    if gpu != peak.unit.startswith("cuda:") or (not gpu and peak.unit != "CPU"):
        yield f"peak_run.peak.unit: {peak.unit!r} is not a figure of {spec.compute_unit.value}"
    if not peak.available:
        yield "peak_run: an unavailable figure travels as the task's failure (unit_unavailable)"
        return
    batch = GPU_PEAK_BATCH if gpu else 1
    if run.batch != batch:
        yield f"peak_run.batch: {run.batch} products per call, the kernel runs {batch}"
    largest = spec.peaks.largest
    size = run.size // MIB if want in BANDWIDTHS else run.size
    if largest is not None and size > largest:
        yield f"peak_run.size: {size} past the task's largest size {largest}"
    if len(run.times_s) < PEAK_MIN_REPEATS:
        yield f"peak_run.times_s: {len(run.times_s)} timed calls, at least {PEAK_MIN_REPEATS}"


def _believed(run: PeakRun, profile: DeviceProfile) -> Iterator[str]:
    """The figure held to physics, and to the worker's calibration where that was taken on a quiet
    machine, as one of its advertised peaks is (`peak_problems`)."""
    peak = run.peak
    bound, of = _physics(peak.unit, peak.precision, profile)
    if peak.per_s > bound:
        yield f"peaks[{peak.unit} {peak.precision}] {peak.per_s:.4g} {peak.figure} over {bound:.4g} ({of})"
        return
    cal = profile.calibration
    if cal is None or not cal.quiet:
        return  # a calibration taken under load is no ceiling: an honest peak stands far above it
    others = tuple(p for p in cal.peaks if (p.unit, p.precision) != (peak.unit, peak.precision))
    held = profile.with_(calibration=cal.with_(peaks=(*others, peak)))
    mine = f"peaks[{peak.unit} {peak.precision}]"
    yield from (p for p in peak_problems(held) if p.startswith(mine))


def _physics(unit: str, precision: str, profile: DeviceProfile) -> tuple[float, str]:
    """The most a figure can be on this profile's hardware, and what that bound is made of."""
    if unit != "CPU":
        if not profile.gpus:
            return 0.0, "no GPU listed"
        return MAX_GPU_TFLOPS * 1e3, f"{MAX_GPU_TFLOPS:g} TFLOPS"
    if precision in BANDWIDTHS:
        return MAX_COPY_GBS, f"{MAX_COPY_GBS:g} GB/s"
    cores = max(profile.cores_logical, 1)
    ratio = PRECISION_RATIO.get(precision, 1.0)
    return ratio * cores * MAX_GFLOPS_PER_CORE, f"{ratio:g} x {cores} cores x {MAX_GFLOPS_PER_CORE:g} GFLOPS"


__all__ = ["peak_parts"]
