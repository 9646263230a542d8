"""A paced workload: every ONNX inference of this process takes the time the test set.

A lab that compares replicas' timings (tests/labs/e2e/test_replication.py and the others) starts its
workers with this folder on PYTHONPATH and `SARK_LAB_PACE_MS` set (`kit.campaignlab.CampaignLab`,
`pace_ms`); Python imports this file at the start of each of their processes, the spawned measuring
children included. There, once `drivers.runtimes.onnx` is imported, `OnnxLoaded.runner` runs the
real session (its outputs are the model's) and then sleeps to `PACE_MS` after the call began: an
inference takes max(PACE_MS, the real run), and with PACE_MS well above the real run on a loaded
machine every honest replica times the same model, so their timings compare at load 8 as on an idle
machine. A liar's lie (halved samples, outputs never computed, scattered processes) sits on top of
the pace, as it sits on top of the real run without it. Without `SARK_LAB_PACE_MS` it does nothing.

Nothing in the product reads this folder.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

PACE_ENV = "SARK_LAB_PACE_MS"
TARGET = "drivers.runtimes.onnx"


def pace(module: ModuleType, pace_s: float) -> None:
    """Wrap `module.OnnxLoaded.runner`: each run returns the real outputs at `pace_s` after it began."""
    honest = module.OnnxLoaded.runner

    def runner(self: Any, feeds: Any) -> Callable[[], object]:
        run = honest(self, feeds)

        def paced() -> object:
            until = time.perf_counter() + pace_s
            outputs = run()
            while (left := until - time.perf_counter()) > 0:
                time.sleep(left)
            return outputs

        return paced

    module.OnnxLoaded.runner = runner


class _Pacer(importlib.abc.MetaPathFinder):
    """Paces `drivers.runtimes.onnx` when it is first imported (nothing is imported ahead of it)."""

    def __init__(self, pace_s: float) -> None:
        self.pace_s = pace_s

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, pace_s = spec.loader, self.pace_s
        execute = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: ModuleType) -> None:
            execute(module)
            pace(module, pace_s)

        loader.exec_module = exec_module  # type: ignore[attr-defined]
        return spec


if os.environ.get(PACE_ENV):
    sys.meta_path.insert(0, _Pacer(float(os.environ[PACE_ENV]) / 1000.0))
