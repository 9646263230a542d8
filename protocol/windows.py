"""Windows over time from raw parts: the timed samples, the marks the child set, and telemetry.

Pure; the worker and the submitter both call it (`protocol.aggregate.derive`). A mark is a pair
(`mark_runs[k]`, `mark_ms[k]`): the index in `samples_ms` of the first run timed after `mark_ms[k]`
on the task's time axis. The stretch between two consecutive marks is a `Window`: in a sustained
run the child marks each window's edge, so the stretches are its windows; in any other run it marks
each progress chunk, and the stretches draw latency over time. A telemetry point belongs to the
window its reading time falls in (start < t <= end: a point covers the period that ends at t).

Throttling: a window whose median is more than `DRIFT_PCT` from the first window's has drifted.
Its causes compare the slower of the two windows with the faster one: the slowest core group's
clock (or the GPU SM clock) more than `CLOCK_DROP_PCT` lower, an NVML thermal, power or hardware
slowdown reason, a sensor at its "high" mark, or background load: other processes' CPU use at least
`BACKGROUND_RISE` cores higher, or the measuring process's CPU share (the time it ran of the time
it was runnable) at least `SHARE_DROP` lower, or lower by enough to account for at least
`SHARE_EXPLAINS` of the slowdown (on a saturated machine the first cannot rise; the second still
falls). A process that needs the CPU throughout runs `calm / share` times slower when its share
falls from `calm` to `share`: on a machine already saturated by others (load 3-5 on two cores, a
share of 12 % in the first window), a hog on the measuring core took the share from 12.5 % to 9.7 %
and the median 25 % up, a drop the fixed 25 % bound called "unexplained" though it predicts +29 %.
That prediction is of the runs' mean, the time a run takes on average over the window's time
slices, so it is held to the mean's slowdown, not the median's: a run of a few milliseconds on a
core shared in slices of the scheduler's own length finishes in one slice or waits for the next, and
its median moves by whole waits. At load 6 beside the suite (a share of 28 % falling to 25 %), the
median rose 38 % and the mean 17 %: the share predicts +13 %, 75 % of the mean's rise and a third
of the median's, which left the hog's windows "unexplained" every time
(tests/labs/measuring/test_background_load.py). A slower window whose process got at most
`CONTENDED_SHARE` of the time it was runnable (it waited for a CPU at least as long as it ran) names
the background load too, whatever the faster window's share: its runs' times are the scheduler's
slicing as much as the device's. CI at 43c2e9d: the suite held the first window's share at 29 %
(median 2.8 ms: most runs finished within a slice, a few waited long), three hogs on the core kept it
at 27 % (the balancer moved the suite's processes off), and the median rose 416 % and the mean about
40 % as every run waited for three hogs' slices and came back to a colder cache: no rule above
reads a change, yet the hogs moved every run. A slower window that ran beside at least
`BESIDE_CORES` of other processes' work names the background load too, whatever changed: a run that
shares a core's caches, its sibling thread or the memory bus with a whole core of others' work is
slowed without waiting for a CPU. Beside the suite (2026-11-28, the labs' processes started fresh,
`tests/labs/measuring/test_background_load.py`) the first window's median was 8.20 ms at a share of
63 % beside 1.34 cores of others, the second's 4.40 ms at 59 % beside 1.38: no share, clock or load
changed, and the first window was the slow one. None of them: `unexplained`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from protocol.stats import median
from protocol.telemetry import (
    NVML_HW_SLOWDOWN,
    POWER_REASONS,
    THERMAL_REASONS,
    Sustained,
    TelemetryPoint,
    ThrottleCause,
    Window,
)

DRIFT_PCT: Final = 10.0
CLOCK_DROP_PCT: Final = 10.0
BACKGROUND_RISE: Final = 0.5
"""Cores of background load more in the slower window than in the faster one that count as a cause."""
SHARE_DROP: Final = 0.25
"""A CPU share this much lower (relative) in the slower window than in the faster one is a cause."""
CONTENDED_SHARE: Final = 0.5
"""A slower window whose process ran at most this share of its runnable time (it waited for a CPU as
long as it ran, or longer) names background load whatever the faster window's share."""
BESIDE_CORES: Final = 1.0
"""Other processes' CPU use in the slower window, in cores, that names background load whatever the
faster window saw: the run shared the machine with a whole core of others' work."""
SHARE_EXPLAINS: Final = 0.5
"""A lower CPU share is a cause too when the slowdown it predicts (`calm / share - 1`) is at least
this part of the slowdown of the window's mean run (the share's prediction is of the mean)."""


def windows(
    samples_ms: Sequence[float],
    mark_runs: Sequence[int],
    mark_ms: Sequence[float],
    points: Sequence[TelemetryPoint] = (),
) -> tuple[Window, ...]:
    """The stretches between consecutive marks, each with its median and its telemetry's summary.

    Marks must fit (`scheduler.verification.figures` checks that first): as many runs as times, both
    non-decreasing, runs within the samples.
    """
    out = []
    for k in range(len(mark_runs) - 1):
        start, end = mark_ms[k], mark_ms[k + 1]
        part = samples_ms[mark_runs[k] : mark_runs[k + 1]]
        inside = [p for p in points if start < p.t_ms <= end]
        out.append(_window(part, start, end, inside))
    return tuple(out)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _window(part: Sequence[float], start: float, end: float, points: Sequence[TelemetryPoint]) -> Window:
    clocks = [min(p.cpu_mhz) for p in points if p.cpu_mhz]
    temps = [p.temp_c for p in points if p.temp_c is not None]
    sm = [p.gpu_sm_mhz for p in points if p.gpu_sm_mhz is not None]
    power = [p.gpu_power_w for p in points if p.gpu_power_w is not None]
    return Window(
        start_ms=start,
        end_ms=end,
        runs=len(part),
        median_ms=median(part) if part else None,
        cpu_mhz=_mean(clocks),
        temp_c=max(temps) if temps else None,
        background_cores=_mean([p.background_cores for p in points]),
        cpu_share=_mean([p.cpu_share for p in points if p.cpu_share is not None]),
        gpu_sm_mhz=_mean(sm),
        gpu_power_w=_mean(power),
    )


def sustained(
    samples_ms: Sequence[float],
    mark_runs: Sequence[int],
    mark_ms: Sequence[float],
    points: Sequence[TelemetryPoint],
    window_s: float,
) -> Sustained:
    """A sustained run's windows, each drifted one with its causes, and the verdict."""
    plain = windows(samples_ms, mark_runs, mark_ms, points)
    timed = [w for w in plain if w.median_ms is not None]
    if not timed:
        return Sustained(window_s=window_s, windows=tuple(plain))
    first = timed[0]
    assert first.median_ms is not None
    means = [_mean(samples_ms[mark_runs[k] : mark_runs[k + 1]]) for k in range(len(mark_runs) - 1)]
    first_mean = means[plain.index(first)]
    out: list[Window] = []
    causes: list[ThrottleCause] = []
    details: list[str] = []
    for number, w in enumerate(plain, start=1):
        if w.median_ms is None or first.median_ms <= 0:
            out.append(w)
            continue
        drift = (w.median_ms - first.median_ms) / first.median_ms * 100.0
        w = w.with_(drift_pct=drift)
        if abs(drift) > DRIFT_PCT:
            slow, fast = (w, first) if drift > 0 else (first, w)
            pair = (means[number - 1], first_mean)
            inside = [p for p in points if slow.start_ms < p.t_ms <= slow.end_ms]
            found = _causes(slow, fast, inside, _slowdown(*(pair if drift > 0 else pair[::-1])))
            w = w.with_(causes=found)
            causes.extend(c for c in found if c not in causes)
            details.append(_detail(number, w, first, found))
        out.append(w)
    return Sustained(
        window_s=window_s,
        windows=tuple(out),
        throttled=bool(details),
        causes=tuple(causes),
        detail="; ".join(details[:3]) + (f"; {len(details) - 3} more windows" if len(details) > 3 else ""),
    )


def _slowdown(slow: float | None, fast: float | None) -> float:
    """How much slower the slower window's mean run is (0.25: 25 %); 0 when it is not slower."""
    return slow / fast - 1 if slow is not None and fast is not None and fast > 0 and slow > fast else 0.0


def _causes(
    slow: Window, fast: Window, slow_points: Sequence[TelemetryPoint], slowdown: float
) -> tuple[ThrottleCause, ...]:
    """What changed between the faster and the slower window; `slowdown`: of the slower window's mean
    run against the faster one's (0.25: 25 %)."""
    found = []
    for ours, theirs in ((slow.cpu_mhz, fast.cpu_mhz), (slow.gpu_sm_mhz, fast.gpu_sm_mhz)):
        if ours is not None and theirs is not None and ours < theirs * (1 - CLOCK_DROP_PCT / 100.0):
            found.append(ThrottleCause.CLOCK_DROP)
            break
    reasons = 0
    for p in slow_points:
        reasons |= p.gpu_reasons
    if reasons & THERMAL_REASONS or any(p.temp_high for p in slow_points):
        found.append(ThrottleCause.THERMAL)
    if reasons & POWER_REASONS:
        found.append(ThrottleCause.POWER_LIMIT)
    if reasons & NVML_HW_SLOWDOWN:
        found.append(ThrottleCause.HARDWARE_SLOWDOWN)
    beside = slow.background_cores is not None and slow.background_cores >= BESIDE_CORES
    if (
        beside
        or _rose(slow.background_cores, fast.background_cores, BACKGROUND_RISE)
        or _share_shows_load(slow.cpu_share, fast.cpu_share, slowdown)
    ):
        found.append(ThrottleCause.BACKGROUND_LOAD)
    return tuple(found) or (ThrottleCause.UNEXPLAINED,)


def _share_shows_load(share: float | None, calm: float | None, slowdown: float) -> bool:
    """The measuring process's CPU share was contended (at most `CONTENDED_SHARE`), or fell from `calm`
    by `SHARE_DROP`, or by enough to predict at least `SHARE_EXPLAINS` of the mean run's `slowdown` (a
    mean not slower: the first two rules alone)."""
    if share is not None and share <= CONTENDED_SHARE:
        return True
    if share is None or calm is None:
        return False
    if share < calm * (1 - SHARE_DROP):
        return True
    return slowdown > 0 and 0 < share < calm and calm / share - 1 >= SHARE_EXPLAINS * slowdown


def _rose(ours: float | None, theirs: float | None, by: float) -> bool:
    return ours is not None and theirs is not None and ours - theirs >= by


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.0%}"


def _detail(number: int, w: Window, first: Window, causes: Sequence[ThrottleCause]) -> str:
    span = f"{w.start_ms / 1000:.1f}-{w.end_ms / 1000:.1f} s"
    text = f"window {number} ({span}): median {w.median_ms:.4g} ms, {w.drift_pct:+.0f}% on window 1"
    shown = []
    for cause in causes:
        if cause == ThrottleCause.BACKGROUND_LOAD:
            shown.append(
                f"background load: other processes {first.background_cores:.2f} -> "
                f"{w.background_cores:.2f} cores, CPU share {_pct(first.cpu_share)} -> {_pct(w.cpu_share)}"
            )
        elif cause == ThrottleCause.CLOCK_DROP and w.cpu_mhz is not None and first.cpu_mhz is not None:
            shown.append(f"clock {first.cpu_mhz:.0f} -> {w.cpu_mhz:.0f} MHz")
        else:
            shown.append(cause.value.replace("_", " "))
    return f"{text}: {', '.join(shown)}"
