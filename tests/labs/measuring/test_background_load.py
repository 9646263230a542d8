"""A CPU hog that starts half-way through a sustained run is named as the background load that moved
its windows (`protocol.windows`, from the measuring child's telemetry).

A lab, not the fast tier: besides the measuring child it starts processes of its own (the hogs, on
the same core as the child), and its point is a real timing on a real core. It holds on a quiet
machine; on one already loaded by other work the first window can be the loaded one, and the test
says which drifted windows must name the competition (tests/unit/drivers/measuring/test_telemetry.py
has the sampler, the marks and the windows' arithmetic without a hog).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers import measure
from drivers.files.models import write_convnet
from protocol import ComputeUnit, Phase, SustainSpec, TaskSpec, ThrottleCause, Window
from scheduler import check_figures

HOG = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"
HOGS = 3
"""Spinners started on the child's core at once. One was not enough in the suite's own weather (three
files at once on two cores): with the child at 55 % of its core before it, the kernel moved the
others off the core as the hog came, the share stayed near half, and the runs' median rose 53 %
"unexplained" (CI-equivalent at 8b594ab). Beside three always-runnable spinners a child that held a
share s keeps about s / (1 + 3 s): a fall of more than a quarter from any share (0.9 -> 0.24,
0.55 -> 0.2, 0.3 -> 0.16), whatever else shares the core."""
QUIET_SHARE = 0.6
"""A child share of its core this high before the hogs: at most a quarter is left beside them."""


@pytest.fixture
def one_core() -> Iterator[None]:
    """This process (and the children it spawns) on CPU 0, where the hog will run too."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def test_a_cpu_hog_half_way_through_a_sustained_run_is_named_as_background_load(
    tmp_path: Path, one_core: None
) -> None:
    model = write_convnet(tmp_path / "big.onnx", channels=32, blocks=3, size=128)  # ~15-25 ms a run
    sustain = SustainSpec(duration_s=8, window_s=2)
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, warmups=3, load_runs=1, threads=1, sustain=sustain)
    hogs: list[subprocess.Popen[bytes]] = []

    def progress(phase: Phase, done: int, total: int) -> None:
        if phase == Phase.MEASURING and done == total // 2 and not hogs:  # the 2nd window's edge: 4 s
            hogs.extend(subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(HOGS))

    try:
        m = measure(model, spec, on_progress=progress)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert hogs, "the child never reported the half-way edge"
    s = m.sustained
    assert s is not None
    assert len(s.windows) == 4
    # The hogs run from the 3rd window on, pinned to the measuring child's core. Each window is
    # compared with the first; on a machine busy with other work (issue 41: load 3-5 on two cores)
    # the first window can be the loaded one, the kernel moves others' processes off the hog's core,
    # and a later window is faster; and runs of a few ms on a core already shared in slices can keep
    # their median while the hog lengthens their mean (load 4 beside the suite: median +0.6 %, 251 runs
    # to 211 a window). Either way every drifted window must name the CPU competition that moved it,
    # never "unexplained". With a quiet first window, a window of the hog's drifts and names it.
    # The child's CPU share falls in the hog's windows only where it held most of its core before:
    # beside the hogs it keeps about a quarter. On a saturated machine (the suite beside four
    # spinners, load 9-10: shares 27 %, 23 % before one hog, 19 %, 25 % with it) the balancer moves
    # other processes off the core as the hogs come, and the share can stay near what it was (CI at
    # 43c2e9d: 29 % before, 27 % and 25 % with three hogs, the median up 416 %): a window whose child
    # ran at most half its runnable time names the competition whatever the first window's share.
    shares = [w.cpu_share for w in s.windows if w.cpu_share is not None]
    assert len(shares) == 4, s
    if min(shares[:2]) >= QUIET_SHARE:
        assert max(shares[2:]) < min(shares[:2]), s
    drifted = [w for w in s.windows if w.drift_pct is not None and abs(w.drift_pct) > 10]
    said = [_said(n, w) for n, w in enumerate(s.windows, 1)]
    unnamed = [
        t
        for t, w in zip(said, s.windows, strict=True)
        if w in drifted and ThrottleCause.BACKGROUND_LOAD not in w.causes
    ]
    assert not unnamed, f"drifted, the competition not named: {unnamed}; every window: {said}"
    assert s.throttled == bool(drifted), s
    if (s.windows[0].cpu_share or 0.0) >= 0.9:
        assert any(w in drifted and (w.drift_pct or 0.0) > 10 for w in s.windows[2:]), s
    if drifted:
        assert ThrottleCause.BACKGROUND_LOAD in s.causes
        assert "background load" in s.detail
    assert not {ThrottleCause.THERMAL, ThrottleCause.POWER_LIMIT} & set(s.causes)
    assert check_figures(m, spec) == m  # the submitter derives the same windows from the raw parts


def _said(number: int, w: Window) -> str:
    """A window's figures whole (a failed assertion's repr of `Sustained` is cut before its windows)."""
    share = "n/a" if w.cpu_share is None else f"{w.cpu_share:.0%}"
    return (
        f"window {number}: {w.runs} runs, median {w.median_ms} ms, drift {w.drift_pct} %, share {share}, "
        f"others {w.background_cores} cores, {w.cpu_mhz} MHz, causes {[c.value for c in w.causes]}"
    )
