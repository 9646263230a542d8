"""Live telemetry of a timed phase, and the windows of a sustained run: the values both sides share.

The measuring child samples the device at a declared period (`Telemetry.period_ms`) while it times
runs: CPU clock per core group, the hottest temperature, the machine's and its own CPU use, and on
NVIDIA the GPU's temperature, SM clock, power and clock-event (throttle) reasons. Times are on the
task's time axis: milliseconds since the first process's timed phase began, the processes' timed
phases laid back to back. A sustained run (`SustainSpec`) times runs for a duration and is cut into
windows; `protocol.windows` derives each window's median and the throttling verdict from the raw
parts (samples, marks, telemetry points).
"""

from __future__ import annotations

import enum
from typing import Final

from pydantic import Field, model_validator

from protocol.base import Value

MAX_POINTS: Final = 2000
"""Telemetry points one task keeps; the child keeps 1 in `stride` once it has this many."""
MAX_WINDOWS: Final = 1000
"""Windows one sustained run may have (duration_s / window_s)."""
MIN_TEMP_C: Final = -40.0
MAX_TEMP_C: Final = 150.0
"""A temperature of silicon: parts are specified from -40 C and a junction's absolute maximum is 150 C.
A sensor outside is broken, not hot (the sampler skips it; the submitter refuses such a point)."""

# NVML clock-event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*), as documented.
NVML_SW_POWER_CAP: Final = 0x4
NVML_HW_SLOWDOWN: Final = 0x8
NVML_SW_THERMAL: Final = 0x20
NVML_HW_THERMAL: Final = 0x40
NVML_HW_POWER_BRAKE: Final = 0x80
THERMAL_REASONS: Final = NVML_SW_THERMAL | NVML_HW_THERMAL
POWER_REASONS: Final = NVML_SW_POWER_CAP | NVML_HW_POWER_BRAKE


class SustainSpec(Value):
    """A sustained run: time runs for `duration_s` in one process, reported per `window_s` window."""

    duration_s: float = Field(gt=0, le=86_400)
    window_s: float = Field(gt=0, le=86_400)

    @model_validator(mode="after")
    def _windows_fit(self) -> SustainSpec:
        if self.window_s > self.duration_s:
            raise ValueError(f"window_s {self.window_s:g} is longer than duration_s {self.duration_s:g}")
        if self.duration_s / self.window_s > MAX_WINDOWS:
            raise ValueError(f"duration_s / window_s is over {MAX_WINDOWS} windows")
        return self


class TelemetryPoint(Value):
    """One reading of the device, covering the period that ends at `t_ms`.

    Attributes:
        t_ms: when it was read, on the task's time axis (ms).
        cpu_mhz: the mean current clock of each core group (`Telemetry.groups`), MHz.
        temp_c: the hottest CPU or board sensor or thermal zone, Celsius; None where there is none.
        temp_high: a sensor was at or above its own "high" mark.
        busy_cores: cores the whole machine kept busy over the period.
        own_cores: cores the measuring process used over the period (busy_cores - own_cores is the
            background load: other processes).
        cpu_share: of the time the measuring process's threads were runnable, the share they ran
            (Linux schedstat: on-CPU time / (on-CPU + run-queue wait)); it falls when other
            processes take the CPU it wants, even on a machine already saturated. None where the
            kernel does not say.
        gpu_temp_c: GPU temperature (NVML), Celsius.
        gpu_sm_mhz: GPU SM clock (NVML), MHz.
        gpu_power_w: GPU board power (NVML), watts.
        gpu_reasons: NVML clock-event reasons bit mask (0 where none or no NVML).
    """

    t_ms: float = Field(ge=0)
    cpu_mhz: tuple[float, ...] = Field(default=(), max_length=64)
    temp_c: float | None = None
    temp_high: bool = False
    busy_cores: float = Field(default=0.0, ge=0)
    own_cores: float = Field(default=0.0, ge=0)
    cpu_share: float | None = Field(default=None, ge=0, le=1)
    gpu_temp_c: float | None = None
    gpu_sm_mhz: float | None = None
    gpu_power_w: float | None = None
    gpu_reasons: int = Field(default=0, ge=0)

    @property
    def background_cores(self) -> float:
        """Cores other processes kept busy over the period."""
        return max(0.0, self.busy_cores - self.own_cores)


class Telemetry(Value):
    """The device's telemetry over a task's timed phases.

    Attributes:
        period_ms: the declared sampling period.
        groups: the core groups `cpu_mhz` follows, e.g. "cpu0-3 (max 2400 MHz)".
        sources: what was read and from where, and what was not with the reason.
        stride: 1 point in `stride` was kept (the child thins its points to stay under MAX_POINTS).
        points: the readings, in time order.
    """

    period_ms: float = Field(gt=0)
    groups: tuple[str, ...] = Field(default=(), max_length=64)
    sources: tuple[str, ...] = Field(default=(), max_length=32)
    stride: int = Field(default=1, ge=1)
    points: tuple[TelemetryPoint, ...] = Field(default=(), max_length=MAX_POINTS)


class ThrottleCause(enum.StrEnum):
    """Why a window's median drifted, as telemetry shows it."""

    CLOCK_DROP = "clock_drop"
    THERMAL = "thermal"
    POWER_LIMIT = "power_limit"
    HARDWARE_SLOWDOWN = "hardware_slowdown"
    BACKGROUND_LOAD = "background_load"
    UNEXPLAINED = "unexplained"


class Window(Value):
    """One window of a sustained run (or one stretch of a timed phase), derived from raw parts.

    Attributes:
        start_ms: its start on the task's time axis.
        end_ms: its end.
        runs: timed runs kept in it.
        median_ms: the median of those runs; None when it has none.
        drift_pct: change of the median against the first window's, percent.
        cpu_mhz: mean clock of the slowest core group over its telemetry points.
        temp_c: hottest temperature over its points.
        background_cores: mean background load over its points.
        cpu_share: mean CPU share of the measuring process over its points.
        gpu_sm_mhz: mean GPU SM clock over its points.
        gpu_power_w: mean GPU power over its points.
        causes: when it drifted beyond the bound: what telemetry shows changed.
    """

    start_ms: float
    end_ms: float
    runs: int = Field(ge=0)
    median_ms: float | None = None
    drift_pct: float | None = None
    cpu_mhz: float | None = None
    temp_c: float | None = None
    background_cores: float | None = None
    cpu_share: float | None = None
    gpu_sm_mhz: float | None = None
    gpu_power_w: float | None = None
    causes: tuple[ThrottleCause, ...] = ()


class Sustained(Value):
    """A sustained run's windows and verdict.

    Attributes:
        window_s: the declared window.
        windows: every window, in time order.
        throttled: some window's median drifted more than `protocol.windows.DRIFT_PCT` from the first's.
        causes: the causes over all drifted windows, first seen first.
        detail: for people: which window, how far, and what telemetry showed.
    """

    window_s: float
    windows: tuple[Window, ...] = Field(default=(), max_length=MAX_WINDOWS)
    throttled: bool = False
    causes: tuple[ThrottleCause, ...] = ()
    detail: str = ""
