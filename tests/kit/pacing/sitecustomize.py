"""A paced workload: every ONNX inference of this process takes the time the test set.

A lab that compares replicas' timings (tests/labs/e2e/test_replication.py and the others) starts its
workers with this folder on PYTHONPATH and `SARK_LAB_PACE_MS` set (`kit.campaignlab.CampaignLab`,
`pace_ms`); Python imports this file at the start of each of their processes, the spawned measuring
children included. There, once `drivers.runtimes.onnx` is imported, `OnnxLoaded.runner` runs the
real session (its outputs are the model's) and then sleeps to `PACE_MS` after the call began, and
the measuring child (`drivers.measuring.child`, whose clock is the one its timed loop reads) times
that call at the pace set: `PACE_MS` times 1 to 1 + `JITTER`, drawn per inference from a generator
seeded by the process (a forked child reseeds with its own id), whatever the call really took.

Why the time is set and not only slept to: on a loaded machine a sleeping process wakes when the
scheduler gives it a core, a whole tick or several late (on this 2-core machine at load 8 a 10 ms
sleep took 33 ms at the median and 48 ms at p90; 12 ms at load 16 in the same minute), and the
real run itself stretches alike, so replicas measured a minute apart timed the same paced model 30 %
apart (10.32 against 13.43 ms) and an honest pair could not agree. A sleep holds the wall time, so
leases, deadlines and interrupts see a measurement as long as it would be; the clock the child reads
makes its figure the test's. The jitter is an honest device's own scatter, small and weather-free,
so that the class's pool of replica errors learns a band as it does from real devices (identical
figures would teach it nothing, and its band would stay the wide prior). A liar's lie (halved
samples, outputs never computed, scattered processes) sits on top of the pace, as it sits on top of
the real run without it. Without `SARK_LAB_PACE_MS` it does nothing.

A paced session's intra-op threads do not spin. onnxruntime's spin between runs by default, and
between paced runs, which sleep, they kept a core busy for nothing: a paced child of 100 runs at two
threads took 1.41 CPU-s in its 1.23 s, and 0.33 CPU-s with spinning off; that was load on every lab
beside it. The session's conditions say so ("spinning False"), alike for every paced worker.

Nothing in the product reads this folder.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final

PACE_ENV = "SARK_LAB_PACE_MS"
RUNTIME: Final = "drivers.runtimes.onnx"
CHILD: Final = "drivers.measuring.child"
JITTER: Final = 0.02
"""A paced inference is timed at the pace times 1 to 1 + this (upward only: every honest figure is at
least the pace, which the labs check)."""


class Clock:
    """`time` as the measuring child reads it: the real clock, except that the first reading after a
    paced inference is the reading before it plus the time set (`paced`), and the clock goes on from
    there at the real rate. The child reads it once either side of each call, so each call is timed
    at its set time exactly, and the clock never runs backwards."""

    def __init__(self, seed: int) -> None:
        self.skew_ns = 0
        self.last_ns = 0
        self.pinned_ns: int | None = None
        self.draw = random.Random(seed)

    def perf_counter_ns(self) -> int:
        real = time.perf_counter_ns()
        if self.pinned_ns is not None:
            self.skew_ns, self.pinned_ns = self.pinned_ns - real, None
        self.last_ns = real + self.skew_ns
        return self.last_ns

    def perf_counter(self) -> float:
        return self.perf_counter_ns() / 1e9

    def paced(self, set_ns: int) -> None:
        """A paced inference ended: it took `set_ns` since the last reading."""
        self.pinned_ns = self.last_ns + set_ns

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


CLOCK = Clock(os.getpid())


def _reseed() -> None:
    """A child forked from a process that imported this (the drivers' fork server) draws its own
    jitter: seeded by its own process id, as a spawned one is."""
    CLOCK.draw.seed(os.getpid())


os.register_at_fork(after_in_child=_reseed)


def pace(module: ModuleType, pace_s: float) -> None:
    """Wrap `module.OnnxLoaded.runner`: each run returns the real outputs at `pace_s` after it began,
    and the measuring child's clock times it at the pace set (`Clock`); and the module's session
    options: no intra-op spinning (threads that wait out a paced run's sleep block)."""
    honest = module.OnnxLoaded.runner
    pace_ns = int(pace_s * 1e9)
    options = module._options

    def unspun(*args: Any, **kwargs: Any) -> Any:
        made = options(*args, **kwargs)
        made.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return made

    module._options = unspun

    def runner(self: Any, feeds: Any) -> Callable[[], object]:
        run = honest(self, feeds)

        def paced() -> object:
            until = time.perf_counter_ns() + pace_ns
            outputs = run()
            while (left := until - time.perf_counter_ns()) > 0:
                time.sleep(left / 1e9)
            CLOCK.paced(int(pace_ns * (1.0 + CLOCK.draw.uniform(0.0, JITTER))))
            return outputs

        return paced

    module.OnnxLoaded.runner = runner


def clocked(module: ModuleType) -> None:
    """The measuring child reads `CLOCK` for its timed runs."""
    module.time = CLOCK


class _Pacer(importlib.abc.MetaPathFinder):
    """Paces `drivers.runtimes.onnx` and clocks `drivers.measuring.child` when each is first imported
    (nothing is imported ahead of them)."""

    def __init__(self, pace_s: float) -> None:
        self.after: dict[str, Callable[[ModuleType], None]] = {
            RUNTIME: lambda module: pace(module, pace_s),
            CHILD: clocked,
        }

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        then = self.after.pop(name, None)
        if then is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if not self.after:
            sys.meta_path.remove(self)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: ModuleType) -> None:
            execute(module)
            then(module)

        spec.loader.exec_module = exec_module  # type: ignore[attr-defined]
        return spec


if os.environ.get(PACE_ENV):
    sys.meta_path.insert(0, _Pacer(float(os.environ[PACE_ENV]) / 1000.0))
