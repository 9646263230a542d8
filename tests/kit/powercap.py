"""A powercap tree (RAPL's sysfs shape) that a real writer process advances at constant power.

`drivers.measuring.energy` reads RAPL from `SARK_POWERCAP_ROOT` by the same code as from /sys/class/powercap.
This lab builds package 0 with its `core` and `dram` subzones (nested, and linked at the top as
sysfs does) and a `psys` zone, and a writer process that every 10 ms sets each counter to its power
x elapsed time modulo its range (a RAPL counter wraps to 0 at `max_energy_range_uj`), each file
replaced atomically as a sysfs read is. The writer asks for real-time scheduling where it may
(root), so that a loaded machine does not leave the counters stale (a 10 ms step at 6.5 W is
0.065 J). Only package and dram count: core is inside the package, psys is the whole platform.

Where it may not, or where it is late anyway, the writer says by how much: `counter_slack_j` is the
furthest a correct reading can be from power x window (a counter read just before a late write is
stale by the writer's largest step, and each end's clock brackets its read within `TIMED_READ_S`).
The tests bound their readings by it, not by a share of the window that a busy machine outgrows.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from drivers.measuring.counters import TIMED_READ_S

PACKAGE_W: Final = 5.0
DRAM_W: Final = 1.5
COUNTED_W: Final = PACKAGE_W + DRAM_W
PACKAGE_RANGE_UJ: Final = 8_000_000  # wraps every 1.6 s
DRAM_RANGE_UJ: Final = 2_500_000  # wraps every 1.7 s

WRITER: Final = """
import os, sys, time
try:  # wake on time even on a loaded machine: a late write is a stale counter (it runs ~20 us a ms)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
except (AttributeError, OSError):
    pass
root, zones = sys.argv[1], [(p, float(w), int(r)) for p, w, r in (z.split(",") for z in sys.argv[2:])]
t0 = time.monotonic()
def write():
    now = time.monotonic() - t0
    for path, watts, rng in zones:
        tmp = os.path.join(root, path, ".energy_uj")
        with open(tmp, "w") as f:
            f.write(str(int(watts * now * 1e6) % rng))
        os.replace(tmp, os.path.join(root, path, "energy_uj"))
    return now
def say(largest, done):  # the longest a counter stood still (a write's time to the next one's end), and when
    with open(os.path.join(root, ".step"), "w") as f:
        f.write(f"{largest!r} {done!r}")
    os.replace(os.path.join(root, ".step"), os.path.join(root, STEP))
last, largest = write(), 0.0
say(largest, time.monotonic())
print("ready", flush=True)
while True:
    time.sleep(0.01)
    now = write()
    done = time.monotonic()
    largest = max(largest, done - t0 - last)
    say(largest, done)
    last = now
"""
STEP: Final = "largest_step_s"  # the writer's file of its largest step, in the tree's root


def zone(root: Path, folder: str, name: str, range_uj: int) -> str:
    """Make one zone folder (name, range, a counter at 0) and return its path under `root`."""
    path = root / folder
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "max_energy_range_uj").write_text(f"{range_uj}\n")
    (path / "energy_uj").write_text("0\n")
    return folder


@contextmanager
def advancing_powercap(root: Path) -> Iterator[Path]:
    """The tree under `root`, advanced by a writer process until the block ends."""
    zones = [
        f"{zone(root, 'intel-rapl:0', 'package-0', PACKAGE_RANGE_UJ)},{PACKAGE_W},{PACKAGE_RANGE_UJ}",
        f"{zone(root, 'intel-rapl:0/intel-rapl:0:0', 'core', PACKAGE_RANGE_UJ)},3.0,{PACKAGE_RANGE_UJ}",
        f"{zone(root, 'intel-rapl:0/intel-rapl:0:1', 'dram', DRAM_RANGE_UJ)},{DRAM_W},{DRAM_RANGE_UJ}",
        f"{zone(root, 'intel-rapl:1', 'psys', PACKAGE_RANGE_UJ)},20.0,{PACKAGE_RANGE_UJ}",
    ]
    for sub in ("intel-rapl:0:0", "intel-rapl:0:1"):
        (root / sub).symlink_to(root / "intel-rapl:0" / sub)
    writer = subprocess.Popen(
        [sys.executable, "-c", f"STEP = {STEP!r}\n{WRITER}", str(root), *zones],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"  # its first values are written
        yield root
    finally:
        writer.kill()
        writer.wait()
        if writer.stdout is not None:
            writer.stdout.close()


def counter_slack_j(root: Path, watts: float) -> float:
    """How far a correct reading of `watts` over a window that ended before this call may be from watts x
    window: the writer's largest step (a stale counter at one end) until its first write after this
    call (a step still under way counts), and the two ends' clock brackets."""
    asked = time.monotonic()
    while time.monotonic() < asked + 60:  # a writer that never writes again is a failure, said
        largest, done = map(float, (root / STEP).read_text().split())
        if done > asked:
            return watts * (largest + TIMED_READ_S)
        time.sleep(0.005)
    raise AssertionError(f"the powercap writer under {root} wrote nothing for 60 s")
