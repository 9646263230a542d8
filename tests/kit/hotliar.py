"""A hostile worker for tests: the real `sark-node join`, whose telemetry is absurd but finite.

Run as `python tests/kit/hotliar.py join ...`. It is the node's own worker, speaking the real protocol
with its own key; only `drivers.measure` is wrapped, in this process: every telemetry reading of the
real measurement (each core group's clock, the temperatures, the GPU's clock and power) alternates
+1e308 / -1e308 (MHz, °C, W), the shape of the points kept, and the figures are derived again from
the raw parts (`protocol.derive`) so that the result is self-consistent and signed as the worker's
own. Nothing in the product reads this file.
"""

from __future__ import annotations

from typing import Any, Final

import drivers
from node.cli import main
from protocol import Measurement, TaskSpec, Telemetry, TelemetryPoint, derive

HUGE: Final = 1e308
POINTS: Final = 8
"""Points sent at least: a short run samples once or twice, and the lie is in the alternation."""

_honest = drivers.measure


def absurd(telemetry: Telemetry | None) -> Telemetry:
    """The telemetry with every reading alternating +1e308 / -1e308, over at least `POINTS` points
    (invented one period apart after the real ones)."""
    base = telemetry or Telemetry(period_ms=250.0, groups=("cpu0 (max clock not exposed)",))
    last = base.points[-1] if base.points else TelemetryPoint(t_ms=0.0)
    extra = POINTS - len(base.points)
    points = (*base.points, *(last.with_(t_ms=last.t_ms + base.period_ms * (k + 1)) for k in range(extra)))
    groups = len(base.groups)
    lied = []
    for k, point in enumerate(points):
        big = HUGE if k % 2 else -HUGE
        lied.append(
            point.with_(cpu_mhz=(big,) * groups, temp_c=big, gpu_temp_c=big, gpu_sm_mhz=big, gpu_power_w=big)
        )
    return base.with_(points=tuple(lied))


def hot_measure(*args: Any, **kwargs: Any) -> Measurement:
    """The real measurement with absurd telemetry, its figures derived again for its task."""
    m = _honest(*args, **kwargs)
    spec: TaskSpec = kwargs["spec"] if "spec" in kwargs else args[1]
    return derive(m.with_(telemetry=absurd(m.telemetry)), spec)


if __name__ == "__main__":  # the measuring children are spawned and import this file: they stay honest
    drivers.measure = hot_measure
    main()
