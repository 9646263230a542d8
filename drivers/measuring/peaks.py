"""The parent side of the peaks (`sark-node info --bench`): one measuring child, its figures, their cache.

`measure_apart` starts `drivers.measuring.peakchild` in one spawned child (`spawning.start_child`: the
daemon and the CLI import no numpy, torch or onnxruntime for it), takes each `Peak` as the child sends
it, and ends the child on timeout or cancel. A child that dies, fails or times out is a
`ProbeFailed` at stage "peaks" naming the last figure it had taken.

The figures are cached beside the calibration (`peaks-<key>.json`, the calibration's key: the device's
fingerprint and numpy's and onnxruntime's versions) so that `detect_profile` (and so a worker's advert)
carries them as `Calibration.peaks` without measuring them again at every start; only `info --bench`
(or a campaign asking for them) measures.

A campaign's peaks task (`measure_peak`, on a worker): one figure in one spawned child
(`peakchild.job_main`), returned with its raw parts as a `Measurement` whose `peak_run` the submitter
derives again; an unavailable figure is the task failed `unit_unavailable` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import trio
from pydantic import TypeAdapter, ValidationError

from drivers.errors import ProbeFailed, TaskFailed
from drivers.measuring.childio import next_message, stopped
from drivers.measuring.spawning import Child, Entry, NotStarted, start_child
from protocol import (
    ComputeUnit,
    FailureReason,
    Measurement,
    Peak,
    PeakRun,
    RunConditions,
    Stage,
    TaskSpec,
    derive,
)

PEAKS_TIMEOUT_S: Final = 300.0
_PEAKS: Final = TypeAdapter(tuple[Peak, ...])


async def measure_apart(
    *,
    gpu: bool = True,
    only: tuple[str, ...] = (),
    timeout_s: float = PEAKS_TIMEOUT_S,
    on_peak: Callable[[Peak], None] | None = None,
) -> tuple[Peak, ...]:
    """Every figure of this device, measured in one spawned child, in the order taken.

    Args:
        gpu: measure each CUDA device too (when torch sees one).
        only: just these precisions and accesses ("fp32", "copy", ...; none: every figure).
        timeout_s: the whole measurement's limit.
        on_peak: told each figure as it arrives.

    Raises:
        ProbeFailed: the child did not start, failed, died or timed out (stage "peaks").
    """
    try:
        child = start_child(Entry("drivers.measuring.peakchild", "main"), (gpu, only), name="sark-peaks")
    except NotStarted as exc:
        raise ProbeFailed("peaks", exc.detail) from None
    found: list[Peak] = []
    try:
        with trio.move_on_after(timeout_s):
            while True:
                message = await _next(child, found)
                if message[0] == "done":
                    return tuple(found)
                if message[0] == "failed":
                    raise ProbeFailed("peaks", f"{message[1]} (after {_last(found)})")
                if message[0] == "peak":
                    found.append(Peak.model_validate_json(message[1]))
                    if on_peak is not None:
                        on_peak(found[-1])
        raise ProbeFailed("peaks", f"timed out after {timeout_s:g} s (after {_last(found)})")
    finally:
        await stopped(child)


async def _next(child: Child, found: list[Peak]) -> tuple[Any, ...]:
    """The child's next message past its start (None never: an ended child is a ProbeFailed)."""
    while True:
        try:
            message = await next_message(child)
        except NotStarted as exc:
            raise ProbeFailed("peaks", exc.detail) from None
        if message is None:
            await stopped(child)
            raise ProbeFailed("peaks", f"{child.ended()} (after {_last(found)})")
        if message[0] != "started":
            return message


async def measure_peak(spec: TaskSpec) -> Measurement:
    """A peaks task (`TaskSpec.peaks`): its one figure taken in one spawned child
    (`peakchild.job_main`), as a measurement whose figures are derived from its raw parts.

    Raises:
        TaskFailed: the figure is unavailable on this unit (`unit_unavailable`, with why), or the child
            did not start, failed, died (`crashed`) or ran past the task's timeout (`timeout`); at
            stage run, named for the figure.
    """
    assert spec.peaks is not None
    kind = "gpu" if spec.compute_unit == ComputeUnit.GPU_TORCH else "cpu"
    name = f"peaks {spec.peaks.precision} ({kind.upper()})"
    args = (kind, spec.peaks.model_dump_json())
    try:
        child = start_child(Entry("drivers.measuring.peakchild", "job_main"), args, name="sark-peak")
    except NotStarted as exc:
        raise TaskFailed(FailureReason.INTERNAL, exc.detail).located(name, Stage.RUN) from None
    try:
        with trio.move_on_after(spec.timeout_s):
            run = await _run(child, name)
            if not run.peak.available:
                raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, run.peak.reason).located(name, Stage.RUN)
            conditions = RunConditions(background_cores=run.peak.background_cores)
            measured = Measurement.nothing_timed(spec.compute_unit).with_(
                warmups_used=run.warmups, conditions=conditions, peak_run=run
            )
            return derive(measured, spec)
        cause = f"timed out after {spec.timeout_s:g} s"
        raise TaskFailed(FailureReason.TIMEOUT, cause).located(name, Stage.RUN)
    finally:
        await stopped(child)


async def _run(child: Child, name: str) -> PeakRun:
    """The peaks task child's figure (its failure or end a `TaskFailed`)."""
    while True:
        try:
            message = await next_message(child)
        except NotStarted as exc:
            raise TaskFailed(FailureReason.INTERNAL, exc.detail).located(name, Stage.RUN) from None
        if message is None:
            await stopped(child)
            raise TaskFailed(FailureReason.CRASHED, child.ended()).located(name, Stage.RUN)
        if message[0] == "failed":
            raise TaskFailed(FailureReason.INTERNAL, str(message[1])).located(name, Stage.RUN)
        if message[0] == "run":
            return PeakRun.model_validate_json(message[1])


def _last(found: list[Peak]) -> str:
    return f"{found[-1].unit} {found[-1].precision}" if found else "no figure"


def cache_path(cache_dir: Path, key: str) -> Path:
    """Where the figures of calibration key `key` are kept."""
    return cache_dir / f"peaks-{key}.json"


def store(cache_dir: Path | None, key: str, peaks: tuple[Peak, ...]) -> None:
    """Keep the figures for `key` (replacing older ones at once: written aside, then renamed)."""
    if cache_dir is None:
        return
    path = cache_path(cache_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([p.model_dump(mode="json") for p in peaks]))
    tmp.replace(path)


def cached(cache_dir: Path | None, key: str) -> tuple[Peak, ...]:
    """The figures kept for `key`; none when there are none (or they no longer parse: removed)."""
    if cache_dir is None:
        return ()
    path = cache_path(cache_dir, key)
    if not path.is_file():
        return ()
    try:
        return _PEAKS.validate_json(path.read_text())
    except ValidationError:
        path.unlink()
        return ()


__all__ = ["PEAKS_TIMEOUT_S", "cache_path", "cached", "measure_apart", "measure_peak", "store"]
