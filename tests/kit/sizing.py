"""Run counts sized by time on this machine: a lab that needs a task still measuring when something
happens to it (a fault, Ctrl-C, a heartbeat half-way) asks for seconds, and the count follows.

A count alone is a duration only on the machine it was tuned on: the tiny convnet's 2,000 runs took
seconds there and under one on a CPU with AVX-512 (0.3 ms a run), where the fault lab's task ended
before its first heartbeat at half-way. `runs_lasting` times the lab model here (ONNX Runtime on the
CPU, its default threads, the fastest of a few short windows: the least a worker can take) and gives
at least the count the lab was tuned with, so a slower machine runs exactly what it ran before.
"""

from __future__ import annotations

import math
import time
from functools import cache
from pathlib import Path

MODEL = Path(__file__).resolve().parents[2] / "examples" / "models" / "tiny-convnet.onnx"


@cache
def inference_s(model: Path = MODEL) -> float:
    """The fastest of three 0.1 s windows' mean time a run, in seconds."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    sig = session.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in sig.shape]
    feeds = {sig.name: np.zeros(shape, dtype=np.float32)}
    for _ in range(10):
        session.run(None, feeds)
    best = math.inf
    for _ in range(3):
        runs, start = 0, time.perf_counter()
        while (took := time.perf_counter() - start) < 0.1:
            session.run(None, feeds)
            runs += 1
        best = min(best, took / runs)
    return best


def runs_lasting(seconds: float, at_least: int) -> int:
    """Runs of the lab model that take at least `seconds` here, and never fewer than `at_least`."""
    return max(at_least, math.ceil(seconds / inference_s()))


def timed_job(seconds: float, at_least: int) -> dict[str, int]:
    """A one-process job's run fields whose measurement takes at least `seconds` here."""
    runs = runs_lasting(seconds, at_least)
    return {"num_inference_runs": runs, "warmup_runs": 3, "load_runs": 1, "processes": 1}
