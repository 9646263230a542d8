"""The tests' own load generator (`kit.load`): its spinners run while the block runs, and are gone
after it (none left to disturb the next test)."""

from __future__ import annotations

import psutil
from kit.load import Bursts, Load


def test_a_load_runs_its_spinners_for_the_block_and_stops_them_after() -> None:
    me = psutil.Process()
    with Load(2) as load:
        spinners = [psutil.Process(pid) for pid in load.pids]
        assert len(spinners) == 2
        assert all(s.is_running() and s.ppid() == me.pid for s in spinners)
        busy = [s.cpu_times() for s in spinners]
        while not all(  # each spinner's CPU time grows while it runs
            s.cpu_times().user > b.user for s, b in zip(spinners, busy, strict=True)
        ):
            pass
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in spinners)


def test_bursts_run_their_spinners_in_turns_and_stop_them_after() -> None:
    me = psutil.Process()
    with Bursts(2, on_s=0.05, off_s=0.05) as load:
        spinners = [psutil.Process(pid) for pid in load.pids]
        assert len(spinners) == 2
        assert all(s.ppid() == me.pid for s in spinners)
        seen = set()
        while seen != {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING}:  # busy, then idle, in turns
            seen.add(spinners[0].status())
        busy = [s.cpu_times() for s in spinners]
        while not all(s.cpu_times().user > b.user for s, b in zip(spinners, busy, strict=True)):
            pass
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in spinners)
