"""Hostile replicas for tests: the real `sark-node join`, patched in memory, by MODE.

Run as `python tests/kit/replicaliar.py MODE join ...`. It is the node's own worker with its own key,
speaking the real protocol; by MODE:

- `halve`: `drivers.measure` is wrapped in this process: every timed sample and first inference is
  halved and every figure derived again from them (`protocol.derive`), so the result is
  self-consistent (the submitter's own check passes) and only another replica can refute it;
- `shave`: the same at `SHAVE` (0.72x): 38.9 % off an honest figure, inside the band a fresh class's
  single-process replicas are judged with (the prior's, 46.3 %) and outside the band the class learns
  from its honest single-process replicas (issue 50, scope 5);
- `norun`: the measuring children (spawned: they import this file as `__mp_main__`) load the model
  but never run it: the runner returns zeros of each output's shape, so the timings are of nothing
  and the outputs are not the model's;
- `claim`: the profile it advertises claims a calibration this machine cannot reach (1,000 GFLOPS a
  logical core), as a CPU advertising a GPU's speed would;
- `scatter`: a liar that widens its own band. Its processes' samples are scaled by SCATTER in turn
  (0.5x, 0.7x and 1x for three processes: one faster than the lie, one the lie, one true), every figure
  derived again, so its figure is 0.7x and its process medians scatter widely (a spread near 26 %):
  a band set by its own spread (before issue 38 scope 2) was 50 % and took its 43 % lie in;
- `predict`: a rational cheater against spot checks. From each offer it reads the campaign id and
  the task id, computes the spot-check draw as sark-node derived it before issue 38 (sha256 of the
  campaign id as the seed, then of "seed:task id", `old_predicts_checked`) and reports a quarter of
  its samples (figures derived again, as `halve`) only where that draw says "not checked" at
  `PREDICT_P`; elsewhere it is honest. The lie is 4x so that one comparison refutes it on a loaded
  machine: the draw is under test here, not the band.

Nothing in the product reads this file.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from typing import Any

import drivers
from protocol import Calibration, DeviceProfile, Measurement, TaskSpec, derive

MODES = ("halve", "shave", "norun", "claim", "predict", "scatter")
SHAVE = 0.72
"""The `shave` liar's factor on every sample."""
SCATTER = (0.5, 0.7, 1.0)
"""The `scatter` liar's factor for each process in turn: its figure (the median) is 0.7x."""
PREDICT_P = 0.5
"""The spot-check probability the `predict` liar assumes (the lab's campaign asks this one)."""
_honest_measure = drivers.measure
_honest_profile = drivers.detect_profile_apart


def scaling(factor: float) -> Callable[..., Measurement]:
    """`drivers.measure` with every sample and first inference scaled by `factor` and every figure
    derived again."""

    def measure(model_path: Any, spec: TaskSpec, *args: Any, **kwargs: Any) -> Measurement:
        m = _honest_measure(model_path, spec, *args, **kwargs)
        scaled = m.with_(
            samples_ms=tuple(s * factor for s in m.samples_ms),
            first_inferences_ms=tuple(s * factor for s in m.first_inferences_ms),
        )
        return derive(scaled, spec)

    return measure


def scattering_measure(model_path: Any, spec: TaskSpec, *args: Any, **kwargs: Any) -> Measurement:
    """The real measurement with each process's samples scaled by its SCATTER factor, every figure
    derived again: a 0.7x figure with a wide spread of process medians of its own making."""
    m = _honest_measure(model_path, spec, *args, **kwargs)
    runs = m.process_runs or (len(m.samples_ms),)
    factors = [SCATTER[k % len(SCATTER)] for k in range(len(runs))]
    samples: list[float] = []
    for k, n in enumerate(runs):
        start = sum(runs[:k])
        samples += [s * factors[k] for s in m.samples_ms[start : start + n]]
    firsts = tuple(s * factors[k % len(factors)] for k, s in enumerate(m.first_inferences_ms))
    return derive(m.with_(samples_ms=tuple(samples), first_inferences_ms=firsts), spec)


async def claiming_profile(*args: Any, **kwargs: Any) -> DeviceProfile:
    """The real profile with a calibration no CPU of its core count measures."""
    profile = await _honest_profile(*args, **kwargs)
    fake = Calibration(cpu_gflops=1000.0 * max(profile.cores_logical, 1), mem_bandwidth_gbs=20.0, seconds=1.0)
    return profile.with_(calibration=fake)


def _no_run() -> None:
    """In a measuring child: the ONNX runner answers zeros without running the session."""
    import numpy as np

    from drivers.runtimes.onnx import OnnxLoaded

    def runner(self: OnnxLoaded, feeds: Any) -> Any:
        outputs = [
            np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in o.shape], dtype=np.float32)
            for o in self.session.get_outputs()
        ]
        return lambda: outputs

    OnnxLoaded.runner = runner  # type: ignore[method-assign]


def old_predicts_checked(campaign_id: str, task_id: str, p: float = PREDICT_P) -> bool:
    """Whether the spot-check draw of sark-node before issue 38, computed from what every offer
    carries (the campaign id and the task id), checks this task of a trusted peer."""
    seed = int.from_bytes(hashlib.sha256(campaign_id.encode()).digest()[:8], "big")
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < p


def _predicting() -> None:
    """The worker's own measurement, a quarter of it wherever the old draw predicts no spot check."""
    from node.worker.job import Job
    from node.worker.runner import Runner

    honest = Runner._measure

    def measure(self: Runner, job: Job, path: Any) -> Measurement:
        m = honest(self, job, path)
        if old_predicts_checked(job.offer.campaign_id, job.offer.task_id):
            return m
        quarter = m.with_(
            samples_ms=tuple(s / 4 for s in m.samples_ms),
            first_inferences_ms=tuple(s / 4 for s in m.first_inferences_ms),
        )
        return derive(quarter, job.offer.spec)

    Runner._measure = measure  # type: ignore[method-assign]


NORUN_ENV = "SARK_LAB_NORUN"
"""Set by a `norun` worker for its spawned children (they do not see its arguments)."""

if __name__ == "__main__":
    mode = sys.argv.pop(1)
    assert mode in MODES, mode
    if mode == "norun":
        os.environ[NORUN_ENV] = "1"
    if mode in ("halve", "shave"):
        drivers.measure = scaling(0.5 if mode == "halve" else SHAVE)
    elif mode == "scatter":
        drivers.measure = scattering_measure
    elif mode == "claim":
        drivers.detect_profile_apart = claiming_profile
    elif mode == "predict":
        _predicting()
    from node.cli import main

    main()
elif __name__ == "__mp_main__" and os.environ.get(NORUN_ENV):  # a measuring child of a `norun` worker
    _no_run()
