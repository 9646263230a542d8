"""The process lab (`kit.procs.Lab`): what it started, it ends and closes, in whatever state it finds it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from kit.procs import Lab


class _Unheard:
    """A child that has exited and been reaped, whose exit its parent has not heard yet: `poll()` says
    running (as a forked child's does until the fork server's message about it arrives)."""

    def __init__(self, popen: Any) -> None:
        self._popen, self.pid = popen, popen.pid
        self.stdin, self.stdout = popen.stdin, popen.stdout

    def poll(self) -> int | None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        return cast(int, self._popen.wait(timeout))


def test_a_process_gone_before_its_exit_was_heard_is_reaped_and_its_pipes_closed(tmp_path: Path) -> None:
    """A submitter exits by itself after its outcome; a lab that ends at once finds `poll()` still None
    and no process group to kill. It still reaps the process and closes its pipes: it used to stop at the
    `ProcessLookupError`, which `close` swallowed, and leave the stdout pipe to the garbage collector (the
    CI-equivalent at 789643f8: an unclosed pipe's ResourceWarning, an error under the suite's filters, at
    the next test's set-up after `test_network.py`'s churn lab, whose submitter had just exited)."""
    lab = Lab(tmp_path)
    proc = lab.start("quick", [sys.executable, "-c", "pass"])
    assert proc.popen.wait(timeout=60) == 0  # exited and reaped: its pid names no process group now
    proc.popen = cast(Any, _Unheard(proc.popen))
    lab.close()
    assert proc.popen.stdout is not None
    assert proc.popen.stdout.closed
