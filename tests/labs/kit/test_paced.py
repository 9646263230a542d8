"""The labs' paced workload (tests/kit/pacing): a real measuring child's every timed ONNX inference of
the tiny model is timed at the pace the test set, within its jitter, with four spinners of the
test's own on the one core it keeps for itself and them (`kit.load`: load 8's pressure a core), where
a sleep alone woke a whole scheduler tick or more late.

`drivers.measure` in a process started as a worker is, with the labs' environment
(`kit.campaignlab.paced_env`), once with the pace and once without: paced, every sample lies in
[pace, pace x (1 + JITTER)], the processes' medians agree within the jitter, and the run's wall time
is at least the paced inferences' (the sleep still holds it); unpaced, the figures are the model's own
(the pacer does nothing without its variable). A paced session does not spin its intra-op threads
(their spinning through the paced sleeps was load on every lab beside it); an unpaced one does, as
onnxruntime's default. No timing of this machine is asserted.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kit.campaignlab import MODEL, PACE_MS, paced_env
from kit.load import Load, own_core

from protocol import Measurement

PACER = Path(__file__).resolve().parents[2] / "kit" / "pacing" / "sitecustomize.py"
RUNS = 20
PROCESSES = 2


def _jitter() -> float:
    """The pacer's own `JITTER`, read from its file (its module name is Python's start-up hook's)."""
    spec = importlib.util.spec_from_file_location("pacer", PACER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return float(module.JITTER)


MEASURE = """
import sys
from pathlib import Path
from drivers import measure
from protocol import ComputeUnit, TaskSpec
spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=int(sys.argv[2]), warmups=1, load_runs=1,
                processes=int(sys.argv[3]), threads=1, timeout_s=300.0)
print(measure(Path(sys.argv[1]), spec).model_dump_json())
"""


def _measure(env: dict[str, str]) -> tuple[Measurement, float]:
    """`drivers.measure` in a process started with `env`, as a worker is (its measuring children fork
    from a server that Python started with that environment: the pacer is installed as it starts)."""
    started = time.monotonic()
    argv = [sys.executable, "-c", MEASURE, str(MODEL), str(RUNS), str(PROCESSES)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    return Measurement.model_validate_json(done.stdout.strip().splitlines()[-1]), time.monotonic() - started


@pytest.mark.timeout(600)  # a deadline on a loaded machine, not a speed
def test_a_paced_inference_is_timed_at_the_pace_whatever_the_load() -> None:
    jitter = _jitter()
    paced_band = (PACE_MS, PACE_MS * (1 + jitter) + 1e-6)  # the clock reads whole ns
    unpaced = {k: v for k, v in os.environ.items() if k != "SARK_LAB_PACE_MS"}
    with Load(4, cores=own_core()):  # load 8's pressure a core, on one core (`kit.load`)
        paced, wall_s = _measure(paced_env(PACE_MS))
        own, _ = _measure(unpaced)
    assert len(paced.samples_ms) == RUNS * PROCESSES
    assert all(paced_band[0] <= s <= paced_band[1] for s in paced.samples_ms), sorted(paced.samples_ms)[::9]
    assert max(paced.process_medians_ms) / min(paced.process_medians_ms) <= 1 + jitter
    assert wall_s >= RUNS * PROCESSES * PACE_MS / 1000.0  # slept to the pace: the wall time held
    assert not all(paced_band[0] <= s <= paced_band[1] for s in own.samples_ms), own.samples_ms
    assert paced.conditions.spinning is False  # a paced session's threads block while its run sleeps
    assert own.conditions.spinning is True  # onnxruntime's default, what a device measures with
