"""A signed result's figures, derived again from its raw parts before anything shows them.

The worker computes every figure with `protocol.derive` from the raw parts it also sends (timed
samples and how many each process took, timed loads, first inferences, per-request records and the
run's wall time); the submitter calls the same function on the signed measurement and compares.
The wire carries float64 unchanged (msgpack doubles; the store's JSON round-trips them exactly) and
both sides run the same pure Python arithmetic (exact sums, correctly rounded division and square
root), so an honest result derives again to the bit: `REL_TOL` only absorbs a last-digit difference
of another platform's float library. Refused, as a `Refusal`:

- `invalid`: numbers that cannot be a measurement of this task: NaN or infinity anywhere, a negative
  duration (a sample, a load, a first inference, a gap between tokens, a first token after the end),
  a record that says its text was dropped (`node.worker.fit`) but carries one,
  a duration longer than the task's whole timeout, counts that do not fit the task or each other
  (processes, loads, runs per process, samples, records, energy readings; a capacity search's
  levels for a task that asked for none, more records over its levels than a result keeps; a
  throughput run per process, an inference per request at least, no more requests than a CPU unit's
  placed profile has cores; one faster than its timed runs can give is withheld, not refused:
  `protocol.values.ASYNC_SLACK`), a
  request ending after the run (or its level) did, an energy window longer than the timeout
  (negative joules fail the schema); and every reading no raw part re-derives outside what physics,
  the worker's profile and the task allow (`scheduler.verification.bounds`: power, energy and its method,
  idle, temperature, clock, cores, memory, shares), each named with the worker's value and the bound.
- a peaks task's parts that cannot be its own, or a figure over its worker's challenged calibration
  (`scheduler.verification.peakcheck`).
- `inconsistent`: a figure its raw parts contradict, named with the worker's value and the derived one.

An accepted result is shown as derived: `check_figures` returns the derived measurement.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel

from protocol import DeviceProfile, FailureReason, GenerationStats, Measurement, TaskSpec, derive
from protocol.aggregate import is_endpoint
from protocol.capacity import MAX_SEARCH_RECORDS as MAX_SEARCH
from protocol.generation import MAX_RECORDS
from scheduler.verification.bounds import OVERRUN, out_of_bounds
from scheduler.verification.peakcheck import peak_parts

REL_TOL: Final = 1e-9
ABS_TOL: Final = 1e-9
SHOWN: Final = 3  # differences named in one refusal
_REPR: Final = 80  # characters of a value in a refusal's detail


@dataclass(frozen=True)
class Refusal:
    """Why the submitter will not show a result: `invalid` or `inconsistent`, and the detail."""

    reason: FailureReason
    detail: str


def check_figures(
    m: Measurement, spec: TaskSpec, profile: DeviceProfile | None = None, device: DeviceProfile | None = None
) -> Measurement | Refusal:
    """The measurement with every figure derived from its raw parts, or why it is refused.

    Args:
        m: the measurement of a result whose signature checked out.
        spec: the task's spec as the campaign gave it (runs, processes, loads, timeout, generate).
        profile: the worker's profile as the submitter placed the task by
            (`scheduler.verification.bounds`); the submitter always gives it; None bounds the readings
            by physics alone.
        device: the profile the result itself states (`ResultBody.device`), checked against `profile`.
    """
    problem = next(invalid_parts(m, spec, profile, device), None)
    if problem is not None:
        return Refusal(FailureReason.INVALID, problem)
    derived = derive(m, spec)
    wrong = list(itertools.islice(differences("", m, derived), SHOWN))
    if wrong:
        said = [f"{path}: the worker says {_short(theirs)}, its raw parts give {_short(ours)}"
                for path, theirs, ours in wrong]  # fmt: skip
        return Refusal(FailureReason.INCONSISTENT, "; ".join(said))
    return derived


def invalid_parts(
    m: Measurement, spec: TaskSpec, profile: DeviceProfile | None = None, device: DeviceProfile | None = None
) -> Iterator[str]:
    """Every reason the measurement cannot be one of this task, first the non-finite numbers, then
    the counts, the durations, and the readings outside their bounds (`scheduler.verification.bounds`)."""
    for path, value in _numbers("", m):
        if not math.isfinite(value):
            yield f"{path} is {value!r}"
            return
    limit_ms = spec.timeout_s * 1000.0 * OVERRUN
    if spec.peaks is not None or m.peak_run is not None:  # a peaks task's parts (`peakcheck`)
        peaks = list(peak_parts(m, spec, profile, limit_ms / 1000.0))
        yield from peaks if peaks else out_of_bounds(m, spec, profile, device)
        return
    shape = list(_shape(m, spec))
    if shape:
        yield from shape
        return
    for name in ("samples_ms", "load_samples_ms", "first_inferences_ms"):
        for i, value in enumerate(getattr(m, name)):
            yield from _duration(f"{name}[{i}]", value, limit_ms, spec)
    for i, run in enumerate(m.async_runs):
        yield from _duration(f"async_runs[{i}].wall_ms", run.wall_ms, limit_ms, spec)
    yield from _async_runs(m, spec, profile)
    yield from _energy(m, limit_ms, spec)
    if m.generation is not None:
        yield from _records(m.generation, limit_ms, spec)
    for i, level in enumerate(m.capacity.levels if m.capacity is not None else ()):
        problems = _records(level.generation, limit_ms, spec)
        yield from (f"capacity.levels[{i}]: {problem}" for problem in problems)
    yield from out_of_bounds(m, spec, profile, device)


def _shape(m: Measurement, spec: TaskSpec) -> Iterator[str]:
    """Counts that do not fit the task or each other (a derivation from them would be meaningless)."""
    generation = m.generation
    if (spec.generate is None) != (generation is None):
        yield "generation: generate figures for a tensor task, or none for a generate task"
        return
    searched = spec.generate is not None and spec.generate.capacity is not None
    if searched != (m.capacity is not None):
        yield "capacity: a capacity search's levels for a task that asked for none, or none for one that did"
        return
    if m.capacity is not None and sum(len(v.generation.records) for v in m.capacity.levels) > MAX_SEARCH:
        yield f"capacity.levels: more than the {MAX_SEARCH} records a capacity search keeps"
        return
    raw = {"process_runs": m.process_runs, "load_samples_ms": m.load_samples_ms,
           "first_inferences_ms": m.first_inferences_ms, "samples_ms": m.samples_ms}  # fmt: skip
    if is_endpoint(spec):
        yield from (
            f"{name}: {len(v)} values, an endpoint task runs no process" for name, v in raw.items() if v
        )
        return
    processes = len(m.process_runs)
    if processes != spec.processes:
        yield f"process_runs: {processes} processes, the task asked for {spec.processes}"
        return
    counts = {
        "samples_ms": (len(m.samples_ms), sum(m.process_runs), "the processes' runs add up to"),
        "load_samples_ms": (len(m.load_samples_ms), processes * spec.load_runs, "the task's loads are"),
        "first_inferences_ms": (len(m.first_inferences_ms), processes, "its processes are"),
    }
    for name, (have, want, what) in counts.items():
        if have != want:
            yield f"{name}: {have} values, {what} {want}"
    yield from _marks(m)
    if generation is None:
        low, high = (1 if spec.sustain is not None else spec.runs), spec.run_cap()
        for i, runs in enumerate(m.process_runs):
            if not low <= runs <= high:
                yield f"process_runs[{i}]: {runs} timed runs, the task allows {low} to {high}"
    elif len(m.samples_ms) > MAX_RECORDS:
        yield f"samples_ms: {len(m.samples_ms)} requests, more than the {MAX_RECORDS} records a result keeps"
    elif len(generation.records) != len(m.samples_ms):
        yield f"generation.records: {len(generation.records)} records for {len(m.samples_ms)} requests"
    else:
        yield from (
            f"process_runs[{i}]: a process with no request" for i, n in enumerate(m.process_runs) if n < 1
        )


def _async_runs(m: Measurement, spec: TaskSpec, profile: DeviceProfile | None) -> Iterator[str]:
    """Throughput runs that are not one per process, keep more requests in flight than a CPU unit's
    placed profile has logical cores (a CPU plugin runs one request per stream, at most one stream a
    core), or ran fewer inferences than their requests. A rate its process's timed runs cannot give is
    not refused: `protocol.derive` withholds the figure and says why (`Measurement.async_over`), and
    the timed figures, which replicas check, stand."""
    runs = m.async_runs
    if not runs:
        return
    cores = profile.cores_logical if profile is not None else 0
    if cores and spec.compute_unit.value.startswith("CPU ") and any(r.requests > cores for r in runs):
        yield f"async_runs: {max(r.requests for r in runs)} requests in flight on a {cores}-core CPU"
        return
    if len(runs) != len(m.process_runs):
        yield f"async_runs: {len(runs)} throughput runs for {len(m.process_runs)} processes"
        return
    for i, run in enumerate(runs):
        if run.inferences < run.requests:
            yield f"async_runs[{i}]: {run.inferences} inferences, fewer than its {run.requests} requests"


def _marks(m: Measurement) -> Iterator[str]:
    """Marks that cannot cut the samples into stretches of time (`protocol.windows`)."""
    runs, times = m.mark_runs, m.mark_ms
    if len(runs) != len(times):
        yield f"mark_runs: {len(runs)} marks for {len(times)} mark times"
    elif any(r < 0 or r > len(m.samples_ms) for r in runs) or any(b < a for a, b in itertools.pairwise(runs)):
        yield f"mark_runs: not non-decreasing indexes within the {len(m.samples_ms)} samples"
    elif any(t < 0 for t in times) or any(b < a for a, b in itertools.pairwise(times)):
        yield "mark_ms: a negative or decreasing time"


def _duration(path: str, value: float, limit_ms: float, spec: TaskSpec) -> Iterator[str]:
    if value < 0:
        yield f"{path}: a negative duration, {value!r} ms"
    elif value > limit_ms:
        yield f"{path}: {value!r} ms, longer than the task's timeout of {spec.timeout_s:g} s"


def _energy(m: Measurement, limit_ms: float, spec: TaskSpec) -> Iterator[str]:
    """Energy readings: one per process (an endpoint task: one), each window within the timeout."""
    expected = 1 if is_endpoint(spec) else spec.processes
    if m.energy_readings and len(m.energy_readings) != expected:
        yield f"energy_readings: {len(m.energy_readings)} readings, one per process is {expected}"
    for i, r in enumerate(m.energy_readings):
        if max(r.window_s, r.idle_s) * 1000.0 > limit_ms:
            yield f"energy_readings[{i}]: a window longer than the task's timeout of {spec.timeout_s:g} s"


def _records(stats: GenerationStats, limit_ms: float, spec: TaskSpec) -> Iterator[str]:
    """Each request's times: within the timeout, first token before the end, tokens in order, and
    ended within the run's wall time (which the rates divide by)."""
    if stats.wall_s * 1000.0 > limit_ms:
        yield f"generation.wall_s: {stats.wall_s!r} s, longer than the task's timeout of {spec.timeout_s:g} s"
    for i, r in enumerate(stats.records):
        where = f"generation.records[{i}]"
        yield from _duration(f"{where}.e2e_ms", r.e2e_ms, limit_ms, spec)
        if r.ttft_ms is not None and r.ttft_ms > r.e2e_ms * (1 + REL_TOL) + ABS_TOL:
            yield f"{where}.ttft_ms: first token at {r.ttft_ms!r} ms, after the end at {r.e2e_ms!r} ms"
        end = r.e2e_ms * (1 + REL_TOL) + ABS_TOL
        if r.ttfo_ms is not None and not (r.ttft_ms or 0.0) <= r.ttfo_ms <= end:
            yield f"{where}.ttfo_ms: the first answer token at {r.ttfo_ms!r} ms, outside TTFT..E2E"
        if r.text_dropped and r.output_text:
            yield f"{where}.output_text: a text kept although the record says it was dropped"
        times = r.token_times_ms
        if any(t < 0 for t in times) or any(b < a for a, b in itertools.pairwise(times)):
            yield f"{where}.token_times_ms: a negative time or gap between tokens"
        ended = r.started_s + r.e2e_ms / 1000.0
        if ended > stats.wall_s * (1 + REL_TOL) + 1e-6:
            yield f"{where}: ended {ended!r} s into the run, after its wall time of {stats.wall_s!r} s"


def differences(path: str, theirs: object, ours: object) -> Iterator[tuple[str, object, object]]:
    """(field path, the worker's value, the derived value) of every figure that disagrees beyond the
    tolerance; values, tuples and mappings are compared field by field."""
    if theirs is ours:
        return
    if isinstance(theirs, BaseModel) and type(theirs) is type(ours):
        for name in type(theirs).model_fields:
            yield from differences(_join(path, name), getattr(theirs, name), getattr(ours, name))
    elif isinstance(theirs, tuple) and isinstance(ours, tuple) and len(theirs) == len(ours):
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            yield from differences(f"{path}[{i}]", a, b)
    elif isinstance(theirs, dict) and isinstance(ours, dict) and theirs.keys() == ours.keys():
        for key in theirs:
            yield from differences(f"{path}[{key}]", theirs[key], ours[key])
    elif _number(theirs) and _number(ours):
        assert isinstance(theirs, int | float)
        assert isinstance(ours, int | float)
        if not math.isclose(theirs, ours, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            yield path, theirs, ours
    elif theirs != ours:
        yield path, theirs, ours


def _numbers(path: str, value: object) -> Iterator[tuple[str, float]]:
    """Every float inside a value, with its field path."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _numbers(_join(path, name), getattr(value, name))
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _numbers(f"{path}[{i}]", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(f"{path}[{key}]", item)
    elif isinstance(value, float):
        yield path, value


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _REPR else f"{text[: _REPR - 3]}..."
