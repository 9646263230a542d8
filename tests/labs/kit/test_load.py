"""The tests' own load generator (`kit.load`): its spinners run while the block runs, and are gone
after it (none left to disturb the next test).

Each test polls the spinners with a short sleep between looks, never in a busy loop of its own: a
test that spun beside two spinners on two cores, waiting for a set of statuses it might never see
exactly, ran into pytest-timeout's 300 s (the CI run at 897da93 lost an xdist worker there)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
from kit.load import Bursts, Load, own_core

LOOKS = 4000
"""Looks at most, `LOOK_S` apart: a bound on observations, not a timing (spells last 25-75 ms)."""
LOOK_S = 0.005


def _until(seen: Callable[[], bool]) -> bool:
    """Whether `seen()` came true within `LOOKS` looks."""
    for _ in range(LOOKS):
        if seen():
            return True
        time.sleep(LOOK_S)
    return False


def _grows(spinners: list[psutil.Process]) -> bool:
    """Whether every spinner's CPU time grows (it runs)."""
    busy = [s.cpu_times().user for s in spinners]
    return _until(lambda: all(s.cpu_times().user > b for s, b in zip(spinners, busy, strict=True)))


def test_a_load_runs_its_spinners_for_the_block_and_stops_them_after() -> None:
    me = psutil.Process()
    with Load(2) as load:
        spinners = [psutil.Process(pid) for pid in load.pids]
        assert len(spinners) == 2
        assert all(s.is_running() and s.ppid() == me.pid for s in spinners)
        assert _grows(spinners)
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in spinners)


def test_each_spinner_is_a_session_of_its_own_as_another_users_work() -> None:
    """Linux's autogroup shares a core among sessions first: spinners in the caller's session pressed
    only that session's processes, and a lab node (a session of its own) met all of them as one."""
    for kind in (Load(2), Bursts(2, on_s=0.05, off_s=0.05)):
        with kind as load:
            assert _until(lambda: all(os.getsid(pid) == pid for pid in load.pids))
            assert os.getsid(0) not in load.pids


def test_bursts_run_their_spinners_in_turns_and_stop_them_after() -> None:
    me = psutil.Process()
    with Bursts(2, on_s=0.05, off_s=0.05) as load:
        spinners = [psutil.Process(pid) for pid in load.pids]
        assert len(spinners) == 2
        assert all(s.ppid() == me.pid for s in spinners)
        seen: set[str] = set()

        def both() -> bool:  # busy (running or runnable), then idle (sleeping), in turns
            seen.add(spinners[0].status())
            return {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING} <= seen

        assert _until(both), seen
        assert _grows(spinners)
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in spinners)


def test_a_load_on_one_core_keeps_its_caller_and_spinners_there_and_gives_the_cores_back() -> None:
    everyone = os.sched_getaffinity(0)
    core = own_core()
    assert len(core) == 1
    assert core <= everyone
    with Load(2, cores=core) as load:
        assert os.sched_getaffinity(0) == core
        spinners = [psutil.Process(pid) for pid in load.pids]
        assert all(set(s.cpu_affinity()) == core for s in spinners)
        assert _grows(spinners)
    assert os.sched_getaffinity(0) == everyone


def test_a_running_process_joins_the_loads_core_for_the_block_thread_by_thread() -> None:
    """A lab's server started before the block (a module fixture) meets the block's load: each of its
    threads runs on the load's core for the block, and on the cores it had after it."""
    code = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\ntime.sleep(60)"
    server = subprocess.Popen([sys.executable, "-c", code])
    try:
        threads = psutil.Process(server.pid)
        assert _until(lambda: threads.num_threads() == 2)
        everyone = set(threads.cpu_affinity())
        core = own_core()
        with Load(1, cores=core, joining=[server.pid]):
            tids = [t.id for t in threads.threads()]
            assert [os.sched_getaffinity(t) for t in tids] == [core, core]
        assert [os.sched_getaffinity(t) for t in tids] == [everyone, everyone]
    finally:
        server.kill()
        server.wait()
