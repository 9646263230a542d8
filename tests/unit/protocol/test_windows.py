"""Windows and throttle causes from raw parts (pure): drift against the first window, and each cause."""

from __future__ import annotations

import pytest

from protocol import TelemetryPoint, ThrottleCause
from protocol.telemetry import NVML_HW_SLOWDOWN, NVML_HW_THERMAL, NVML_SW_POWER_CAP
from protocol.windows import sustained, windows

CALM = TelemetryPoint(t_ms=0.0, cpu_mhz=(3000.0,), temp_c=50.0, busy_cores=1.0, own_cores=1.0, cpu_share=0.95)


def _run(second: float, first: float = 10.0) -> tuple[list[float], list[int], list[float]]:
    """Two 1 s windows of 10 runs each, medians `first` then `second`; telemetry every 250 ms."""
    samples = [first] * 10 + [second] * 10
    return samples, [0, 10, 20], [0.0, 1000.0, 2000.0]


def _points(late: TelemetryPoint) -> list[TelemetryPoint]:
    early = [CALM.with_(t_ms=t) for t in (250.0, 500.0, 750.0, 1000.0)]
    return early + [late.with_(t_ms=t) for t in (1250.0, 1500.0, 1750.0, 2000.0)]


@pytest.mark.parametrize(
    ("late", "cause"),
    [
        (CALM.with_(busy_cores=2.0), ThrottleCause.BACKGROUND_LOAD),  # others' CPU use rose by a core
        (CALM.with_(cpu_share=0.5), ThrottleCause.BACKGROUND_LOAD),  # saturated: our share fell instead
        (CALM.with_(cpu_mhz=(2000.0,)), ThrottleCause.CLOCK_DROP),
        (CALM.with_(gpu_reasons=NVML_HW_THERMAL), ThrottleCause.THERMAL),
        (CALM.with_(temp_high=True, temp_c=95.0), ThrottleCause.THERMAL),
        (CALM.with_(gpu_reasons=NVML_SW_POWER_CAP), ThrottleCause.POWER_LIMIT),
        (CALM.with_(gpu_reasons=NVML_HW_SLOWDOWN), ThrottleCause.HARDWARE_SLOWDOWN),
        (CALM, ThrottleCause.UNEXPLAINED),
    ],
)
def test_a_drifted_window_names_what_telemetry_shows(late: TelemetryPoint, cause: ThrottleCause) -> None:
    samples, runs, times = _run(13.0)
    s = sustained(samples, runs, times, _points(late), window_s=1.0)
    assert s.throttled
    assert s.windows[1].drift_pct == pytest.approx(30.0)
    assert s.windows[1].causes == (cause,)
    assert s.causes == (cause,)
    assert s.windows[0].causes == ()
    assert s.detail.startswith("window 2 (1.0-2.0 s): median 13 ms, +30% on window 1")


SATURATED = CALM.with_(cpu_share=0.125)  # a machine already busy with others: load 3-5 on two cores
BUSY = CALM.with_(cpu_share=0.8)  # busy, not saturated: the process ran 80 % of its runnable time


@pytest.mark.parametrize(
    ("calm", "share", "second", "cause"),
    [
        (
            0.125,
            0.097,
            12.5,
            ThrottleCause.BACKGROUND_LOAD,
        ),  # measured: 12.5 % -> 9.7 %, +25 %; predicts +29 %
        (0.8, 0.7, 12.5, ThrottleCause.BACKGROUND_LOAD),  # predicts +14 % of +25 %: at least half of it
        (0.8, 0.75, 13.0, ThrottleCause.UNEXPLAINED),  # predicts +7 % of +30 %: not the cause
        (0.8, 0.8, 12.5, ThrottleCause.UNEXPLAINED),  # the share held: something else slowed it
    ],
)
def test_a_lower_share_that_accounts_for_the_drift_is_background_load(
    calm: float, share: float, second: float, cause: ThrottleCause
) -> None:
    """Issue 41: on a saturated machine a hog on the measuring core took the share from 12.5 % to 9.7 %
    and the median up 25 %; the fixed 25 % drop called it unexplained though it predicts the drift.
    Above `CONTENDED_SHARE` a share that fell too little to account for the drift is not its cause."""
    samples, runs, times = _run(second)
    early = [CALM.with_(t_ms=t, cpu_share=calm) for t in (250.0, 500.0, 750.0, 1000.0)]
    late = [CALM.with_(t_ms=t, cpu_share=share) for t in (1250.0, 1500.0, 1750.0, 2000.0)]
    s = sustained(samples, runs, times, early + late, window_s=1.0)
    assert s.windows[1].causes == (cause,)


@pytest.mark.parametrize(
    ("share", "cause"), [(0.798, ThrottleCause.BACKGROUND_LOAD), (0.9, ThrottleCause.UNEXPLAINED)]
)
def test_the_share_is_held_to_the_mean_runs_slowdown_not_the_medians(
    share: float, cause: ThrottleCause
) -> None:
    """tests/labs/measuring/test_background_load.py at load 6 (2026-11-27, three runs alike): runs of
    a few ms on a core shared in slices either finish in one or wait for the next, so the median moves
    by whole waits. The hog took the share down by 11 % (28.2 % to 25.0 %; here 90 % to 79.8 %, above
    `CONTENDED_SHARE`); the median rose 38 % (10.45 -> 14.47 ms), the mean 17 % (8.74 -> 10.19 ms).
    The share predicts +12.8 %: most of the mean's rise, a third of the median's, which a rule held to
    the median read as "unexplained". With the share held: unexplained."""
    first = [3.0] * 52 + [10.45] * 177  # 229 runs in 2 s: median 10.45, mean 8.74
    second = [3.0] * 73 + [14.47] * 124  # 197 runs: median 14.47, mean 10.19
    early = [BUSY.with_(t_ms=t, cpu_share=0.9) for t in (500.0, 1000.0, 1500.0, 2000.0)]
    late = [BUSY.with_(t_ms=t, cpu_share=share) for t in (2500.0, 3000.0, 3500.0, 4000.0)]
    s = sustained(first + second, [0, 229, 426], [0.0, 2000.0, 4000.0], early + late, window_s=2.0)
    assert s.windows[1].drift_pct == pytest.approx(38.5, abs=0.1)
    assert s.windows[1].causes == (cause,)


@pytest.mark.parametrize(
    ("calm", "share", "cause"),
    [
        (0.29, 0.27, ThrottleCause.BACKGROUND_LOAD),  # CI at 43c2e9d: three hogs, the share held
        (0.125, 0.125, ThrottleCause.BACKGROUND_LOAD),  # saturated throughout: still the competition
        (0.9, 0.5, ThrottleCause.BACKGROUND_LOAD),  # waited as long as it ran
        (0.55, 0.55, ThrottleCause.UNEXPLAINED),  # ran more than it waited, and held: not the load
    ],
)
def test_a_slower_window_that_waited_as_long_as_it_ran_names_the_load(
    calm: float, share: float, cause: ThrottleCause
) -> None:
    """CI at 43c2e9d (tests/labs/measuring/test_background_load.py beside the suite): the first window's
    share was 29 % with its median 2.82 ms (most runs within one slice, a few waiting long); with three
    hogs on the core the share stayed 27 % (the balancer moved the suite's processes off it) while the
    median rose 416 % to 14.55 ms, every run waiting for the hogs' slices. Nothing read a change: a
    window whose process waited for a CPU as long as it ran is named for the competition it waited on."""
    first = [2.82] * 200 + [20.0] * 63  # 263 runs in 2 s: median 2.82
    second = [14.55] * 120 + [2.9] * 68  # 188 runs: median 14.55
    early = [SATURATED.with_(t_ms=t, cpu_share=calm) for t in (500.0, 1000.0, 1500.0, 2000.0)]
    late = [SATURATED.with_(t_ms=t, cpu_share=share) for t in (2500.0, 3000.0, 3500.0, 4000.0)]
    s = sustained(first + second, [0, 263, 451], [0.0, 2000.0, 4000.0], early + late, window_s=2.0)
    assert s.windows[1].drift_pct == pytest.approx(416, abs=1)
    assert s.windows[1].causes == (cause,)
    assert ("background load" in s.detail) == (cause == ThrottleCause.BACKGROUND_LOAD)


@pytest.mark.parametrize(
    ("others", "cause"),
    [
        (1.34, ThrottleCause.BACKGROUND_LOAD),  # beside the suite, 2026-11-28: a core and a third of others'
        (0.3, ThrottleCause.UNEXPLAINED),  # a little of others' work, and nothing changed: not the load
    ],
)
def test_a_slower_window_beside_a_core_of_others_work_names_the_load(
    others: float, cause: ThrottleCause
) -> None:
    """tests/labs/measuring/test_background_load.py beside the suite (2026-11-28): the first window's
    median 8.20 ms at a share of 63 % beside 1.34 cores of others' work, the second's 4.40 ms at 59 %
    beside 1.38. No share, clock or load changed; the runs shared the machine with more than a core of
    others' work, and the slow window names it."""
    first = [8.2] * 290  # 290 runs in 2 s: median 8.20
    second = [4.4] * 302  # 302 runs: median 4.40
    busy = CALM.with_(own_cores=0.63, busy_cores=0.63 + others)
    early = [busy.with_(t_ms=t, cpu_share=0.63) for t in (500.0, 1000.0, 1500.0, 2000.0)]
    late = [busy.with_(t_ms=t, cpu_share=0.59, busy_cores=0.59 + others + 0.04) for t in (2500.0, 4000.0)]
    s = sustained(first + second, [0, 290, 592], [0.0, 2000.0, 4000.0], early + late, window_s=2.0)
    assert s.windows[1].drift_pct == pytest.approx(-46.3, abs=0.1)
    assert s.windows[1].causes == (cause,)


def test_a_window_within_ten_percent_is_not_throttled_whatever_telemetry_says() -> None:
    late = CALM.with_(busy_cores=2.0, gpu_reasons=NVML_HW_THERMAL)
    samples, runs, times = _run(10.9)
    s = sustained(samples, runs, times, _points(late), window_s=1.0)
    assert not s.throttled
    assert s.causes == ()
    assert s.detail == ""


def test_a_faster_later_window_blames_the_first_window_s_load() -> None:
    early = CALM.with_(busy_cores=2.0)  # the first window was the loaded one
    samples, runs, times = _run(10.0, first=14.0)
    points = [early.with_(t_ms=t) for t in (500.0, 1000.0)] + [CALM.with_(t_ms=t) for t in (1500.0, 2000.0)]
    s = sustained(samples, runs, times, points, window_s=1.0)
    assert s.windows[1].causes == (ThrottleCause.BACKGROUND_LOAD,)


def test_windows_summarise_their_own_points_and_skip_empty_stretches() -> None:
    points = [CALM.with_(t_ms=500.0, cpu_mhz=(1000.0, 3000.0)), CALM.with_(t_ms=1500.0, temp_c=70.0)]
    out = windows([1.0, 2.0, 3.0, 4.0], [0, 3, 3, 4], [0.0, 1000.0, 1000.0, 2000.0], points)
    assert [w.runs for w in out] == [3, 0, 1]
    assert [w.median_ms for w in out] == [2.0, None, 4.0]
    assert out[0].cpu_mhz == 1000.0  # the slowest core group
    assert out[2].temp_c == 70.0
    assert out[1].background_cores is None
