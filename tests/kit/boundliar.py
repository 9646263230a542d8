"""A hostile worker for tests: the real `sark-node join`, whose readings are absurd but self-consistent.

Run as `python tests/kit/boundliar.py join ...`. Like tests/kit/liar.py it is the node's own worker
with its own key; only `drivers.measure` is wrapped, in this process. Each measurement is taken for
real, then one reading that no raw part re-derives is replaced by a lie chosen by the task's `runs`
(`LIES`), and every figure is derived again from the result with `protocol.derive`, as an honest
worker derives them: the old consistency check passes, and only the submitter's bounds
(`scheduler.verification.bounds`) can refuse it. A task whose `runs` names no lie is measured honestly.
Nothing in the product reads this file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import drivers
from node.cli import main
from protocol import EnergyReading, Measurement, TaskSpec, Telemetry, TelemetryPoint, derive

_honest = drivers.measure
HUGE: Final = 1e308


def _alternating(m: Measurement) -> Measurement:
    """Telemetry points alternating +1e308 / -1e308 W, C and MHz."""
    points = tuple(
        TelemetryPoint(
            t_ms=100.0 * (i + 1),
            cpu_mhz=(sign * HUGE,),
            temp_c=sign * HUGE,
            gpu_temp_c=sign * HUGE,
            gpu_sm_mhz=sign * HUGE,
            gpu_power_w=sign * HUGE,
        )
        for i, sign in enumerate((1.0, -1.0) * 5)
    )
    return m.with_(telemetry=Telemetry(period_ms=100.0, points=points))


def _cold(m: Measurement) -> Measurement:
    """Every telemetry point at -300 C (its other readings as measured, when there are any)."""
    telemetry = m.telemetry or Telemetry(period_ms=100.0, points=(TelemetryPoint(t_ms=100.0),))
    points = telemetry.points or (TelemetryPoint(t_ms=100.0),)
    return m.with_(telemetry=telemetry.with_(points=tuple(p.with_(temp_c=-300.0) for p in points)))


def _energy(**reading: Any) -> Callable[[Measurement], Measurement]:
    return lambda m: m.with_(energy_readings=(EnergyReading(**reading),))


LIES: Final[dict[int, tuple[str, Callable[[Measurement], Measurement]]]] = {
    11: ("telemetry alternating +-1e308", _alternating),
    # 12 runs: (1 J - 10 kW x 40 s) / 12 = -33,333 J per inference
    12: (
        "-33,333 J per inference",
        _energy(method="rapl-package", joules=1.0, window_s=40.0, idle_joules=30_000.0, idle_s=3.0),
    ),
    13: (
        "idle joules larger than the window's",
        _energy(method="rapl-package", joules=10.0, window_s=2.0, idle_joules=60.0, idle_s=3.0),
    ),
    14: ("1e300 J", _energy(method="rapl-package", joules=1e300, window_s=2.0, idle_joules=9.0, idle_s=3.0)),
    15: (
        "an NVML method on a CPU-only device",
        _energy(method="nvml-energy-counter", joules=600.0, window_s=2.0, idle_joules=180.0, idle_s=3.0),
    ),
    16: ("peak memory 1e308 MiB", lambda m: m.with_(peak_load_ram_mb=HUGE, peak_inference_ram_mb=HUGE)),
    17: ("negative temperatures", _cold),
}
"""The lie each task tells, by its `runs` (so one campaign asks for every lie, one job each)."""


def lying_measure(model_path: Any, spec: TaskSpec, *args: Any, **kwargs: Any) -> Measurement:
    """The real measurement with the task's lie, every figure derived again from the lie."""
    m = _honest(model_path, spec, *args, **kwargs)
    lie = LIES.get(spec.runs)
    return m if lie is None else derive(lie[1](m), spec)


if __name__ == "__main__":  # the measuring children are spawned and import this file: they stay honest
    drivers.measure = lying_measure
    main()
