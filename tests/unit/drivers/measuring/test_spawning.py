"""Every child the drivers start goes through `drivers.measuring.spawning.start_child`: apart from Ctrl-C from
its first instant, out of the caller's folder (nothing planted there is imported), capped by its
`Limits`, and a child that cannot run its entry is reported as not started, with the reason."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from types import FrameType
from typing import Final

import pytest

from drivers.measuring import spawning
from drivers.measuring.spawning import STARTED, Child, Entry, Limits, NotStarted, start_child

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

ROOT: Final = Path(__file__).resolve().parents[4]
HERE: Final = Path(__file__).resolve().parent


def _child(conn: Connection) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    conn.send("started")
    signal.sigwait({signal.SIGUSR1})  # the parent's go, after it sent SIGINT to this process
    conn.send("survived")


def _heard(receive: Callable[[], object], pid: int) -> list[object]:
    """What the child says while it is sent SIGINT as it starts and once it runs."""
    os.kill(pid, signal.SIGINT)  # at once: the child is still starting its interpreter
    heard: list[object] = []
    while (message := receive()) is not None and message != "survived":
        if message == (STARTED,):
            continue
        heard.append(message)
        os.kill(pid, signal.SIGINT)  # and once it runs
        os.kill(pid, signal.SIGUSR1)
    return heard if message is None else [*heard, message]


def _plain_receive(receiver: Connection) -> object:
    try:
        return receiver.recv() if receiver.poll(60) else None
    except EOFError:
        return None


def _with_python_handler() -> Callable[[int, FrameType | None], object] | int | None:
    # A child inherits an ignored SIGINT (pytest-xdist's workers ignore it): start it as the CLI
    # would, with Python's own handler in place.
    return signal.signal(signal.SIGINT, signal.default_int_handler)


def test_a_child_started_apart_ignores_sigint_from_its_first_instant() -> None:
    previous = _with_python_handler()
    try:
        child = start_child(Entry(__name__, "_child"), (), name="sark-test")
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert child.process.pid is not None
        heard = _heard(lambda: child.receive() if child.receiver.poll(60) else None, child.process.pid)
        child.process.join(60)
    finally:
        child.stop()
    assert (heard, child.process.exitcode) == (["started", "survived"], 0)


def test_a_plain_child_dies_of_the_same_sigint() -> None:
    ctx = multiprocessing.get_context("spawn")  # the hazard the seam removes, shown on the same path
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(sender,), daemon=True)
    previous = _with_python_handler()
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    sender.close()  # the child's end is the child's alone: its death reads as EOF here, at once
    assert process.pid is not None
    heard = _heard(lambda: _plain_receive(receiver), process.pid)
    process.join(60)
    assert "survived" not in heard
    assert process.exitcode != 0


def test_the_starting_threads_mask_is_restored() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    child = start_child(Entry("os", "getpid"), (), name="sark-test")
    child.process.join(60)
    child.stop()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


def _where(conn: Connection) -> None:
    import yaml

    conn.send((yaml.__file__, os.getcwd()))


PARENT: Final = """
import json, multiprocessing, sys
from drivers.measuring.spawning import Entry, start_child
def plain():
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=test_spawning._where, args=(sender,))
    process.start()
    sender.close()
    answer = receiver.recv()
    process.join()
    return answer
import test_spawning
child = start_child(Entry("test_spawning", "_where"), (), name="sark-test")
messages = [child.receive(), child.receive()]
child.stop()
print(json.dumps({"apart": messages[1], "plain": plain(), "folder": child.folder}))
"""


def test_a_child_imports_nothing_from_the_callers_folder(tmp_path: Path) -> None:
    """A parent with "" on its path (`python -c`, as `python -m` puts its folder there) runs in a
    folder with a `yaml.py`: a plain spawn child imports it; a child of the seam does not, and does
    not run in that folder either."""
    (tmp_path / "yaml.py").write_text("PLANTED = True\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    done = subprocess.run(
        [sys.executable, "-c", PARENT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    planted = str(tmp_path / "yaml.py")
    assert seen["plain"] == [planted, str(tmp_path)]  # the hazard, on the same parent
    assert seen["apart"][0] != planted
    assert Path(seen["apart"][0]).name == "__init__.py"  # PyYAML's own package
    assert seen["apart"][1] == seen["folder"]
    assert not Path(seen["folder"]).exists()  # removed once the child ended


BOOTSTRAP_PARENT: Final = """
import json, sys
from drivers.measuring.spawning import Entry, start_child
if __name__ == "__main__":  # spawn runs this script again in the child, as __mp_main__
    child = start_child(Entry("test_spawning", "_where"), (), name="sark-test")
    messages = [child.receive(), child.receive()]
    child.stop()
    print(json.dumps({"apart": messages[1]}))
"""


def test_multiprocessings_own_start_imports_nothing_from_the_callers_folder(tmp_path: Path) -> None:
    """A parent started as a script (as the `sark-node` console script is: its folder, not "", first
    on its path) in a folder with a `pickle.py`: spawn's bootstrap (`python -c ...`) would put "" first
    and import the planted module with multiprocessing itself, before the seam's first step; the seam
    starts its children with PYTHONSAFEPATH, so the plant never runs and the child works."""
    work, bin_ = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_.mkdir()
    marker = tmp_path / "ran"
    (work / "pickle.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n")
    (bin_ / "parent.py").write_text(BOOTSTRAP_PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    env.pop("PYTHONSAFEPATH", None)
    done = subprocess.run(
        [sys.executable, str(bin_ / "parent.py")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert Path(json.loads(done.stdout)["apart"][0]).name == "__init__.py"  # PyYAML's own package
    assert "PYTHONSAFEPATH" not in os.environ  # the parent's environment is left as it was


def test_a_child_whose_entry_cannot_be_imported_did_not_start() -> None:
    child = start_child(Entry("no_such_module_here", "main"), (), name="sark-test")
    try:
        assert child.receiver.poll(60)
        with pytest.raises(NotStarted) as failed:
            child.receive()
    finally:
        child.stop()
    assert "did not start" in failed.value.detail
    assert "ModuleNotFoundError" in failed.value.detail
    assert not child.started


def _allocate(conn: Connection, mb: int) -> None:
    try:
        block = bytearray(mb << 20)
    except MemoryError:
        conn.send(("refused", mb))
        return
    conn.send(("allocated", len(block) >> 20))


def _answer(child: Child) -> object:
    try:
        while child.receiver.poll(60):
            message = child.receive()
            if message != (STARTED,):
                return message
        return None
    finally:
        child.stop()


def test_limits_cap_the_child_above_its_own_size() -> None:
    capped = Limits(address_space_mb=64)
    assert _answer(start_child(Entry(__name__, "_allocate"), (512,), name="sark-test", limits=capped)) == (
        "refused",
        512,
    )
    assert _answer(start_child(Entry(__name__, "_allocate"), (8,), name="sark-test", limits=capped)) == (
        "allocated",
        8,
    )


def test_a_child_capped_below_its_job_did_not_start() -> None:
    """Its job could not be read under its limits: that is a start that failed, not a crash."""
    big = (b"x" * (64 << 20),)
    child = start_child(Entry(__name__, "_allocate"), (big,), name="sark-test", limits=Limits(16))
    with pytest.raises(NotStarted) as failed:
        _answer(child)
    assert "MemoryError" in failed.value.detail


def _read_address_zero(conn: Connection) -> None:
    import ctypes

    conn.send(("reading",))
    ctypes.string_at(0)  # SIGSEGV in native code, as a runtime's bug would


def test_a_child_killed_by_a_fatal_signal_names_the_python_frame_it_died_in() -> None:
    """A runtime that crashes the child (SIGSEGV in its native code) leaves its Python caller named,
    not only the signal: the child's fault handler writes into its own folder, read before it goes."""
    child = start_child(Entry(__name__, "_read_address_zero"), (), name="sark-test")
    try:
        while child.receiver.poll(60) and child.receive() is not None:
            pass
        child.process.join(60)
        assert child.process.exitcode == -signal.SIGSEGV
        here = Path(__file__).resolve().relative_to(Path(spawning.OURS))
        assert child.crash_site().startswith("in string_at (ctypes/__init__.py:")
        assert child.crash_site().endswith(f" from _read_address_zero ({here}:{_ZERO_LINE})")
        assert child.ended() == f"the child died of SIGSEGV {child.crash_site()} and no result"
    finally:
        child.stop()
    assert not Path(child.folder).exists()


_ZERO_LINE: Final = _read_address_zero.__code__.co_firstlineno + 4


def test_a_crash_site_is_the_innermost_frame_of_the_thread_that_met_the_signal() -> None:
    trace = """Fatal Python error: Segmentation fault

Current thread 0x00007f4e (most recent call first):
  File "/site/drivers/runtimes/gguflm.py", line 88 in open_model
  File "/site/drivers/measuring/genchild.py", line 96 in _measure

Thread 0x00007f4f (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
"""
    ours = Path(spawning.OURS)
    trace = trace.replace("/site/", f"{ours}/")
    assert spawning.crash_site(trace) == "in open_model (drivers/runtimes/gguflm.py:88)"
    library = trace.replace(
        '  File "', '  File "/usr/lib/python3.12/ctypes/__init__.py", line 519 in string_at\n  File "', 1
    )
    assert spawning.crash_site(library) == (
        "in string_at (ctypes/__init__.py:519) from open_model (drivers/runtimes/gguflm.py:88)"
    )
    frozen = trace.replace(
        '  File "',
        '  File "<frozen importlib._bootstrap>", line 488 in _call_with_frames_removed\n  File "',
        1,
    )
    assert spawning.crash_site(frozen) == (  # a native module that crashed as it was imported
        "in _call_with_frames_removed (<frozen importlib._bootstrap>:488)"
        " from open_model (drivers/runtimes/gguflm.py:88)"
    )
    assert spawning.crash_site("") == ""


def _cpus(conn: Connection) -> None:
    conn.send(sorted(os.sched_getaffinity(0)))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_a_child_runs_on_the_cpus_its_parent_runs_on_now() -> None:
    """As a spawned child would: a parent pinned to one core after the fork server started (a lab
    that puts the measured child beside its own hog) pins the child it starts then."""
    _answer(start_child(Entry(__name__, "_cpus"), (), name="sark-test"))  # the server runs already
    before = os.sched_getaffinity(0)
    one = min(before)
    os.sched_setaffinity(0, {one})
    try:
        pinned = _answer(start_child(Entry(__name__, "_cpus"), (), name="sark-test"))
    finally:
        os.sched_setaffinity(0, before)
    assert pinned == [one]
    assert _answer(start_child(Entry(__name__, "_cpus"), (), name="sark-test")) == sorted(before)


def _origin(conn: Connection) -> None:
    conn.send((os.getppid(), spawning.FORKHOST in sys.modules))


@pytest.mark.skipif(sys.platform != "linux", reason="children fork from a server on Linux only")
def test_on_linux_a_child_is_forked_by_a_server_that_imported_every_entry_once() -> None:
    """Not spawned (an interpreter that imports `protocol`, numpy and its entry again): forked by
    the fork server, which imported `forkhost` and is not this process."""
    first = _answer(start_child(Entry(__name__, "_origin"), (), name="sark-test"))
    second = _answer(start_child(Entry(__name__, "_origin"), (), name="sark-test"))
    assert isinstance(first, tuple)
    server, preloaded = first
    assert preloaded
    assert server != os.getpid()
    assert second == first  # one server for every child


@pytest.mark.parametrize(
    ("platform", "frozen", "method"),
    [
        ("linux", False, "forkserver"),
        ("linux", True, "spawn"),
        ("darwin", False, "spawn"),
        ("win32", False, "spawn"),
    ],
)
def test_children_fork_from_the_server_only_on_linux_from_source(
    monkeypatch: pytest.MonkeyPatch, platform: str, frozen: bool, method: str
) -> None:
    """macOS forks unsafely after its frameworks; a frozen binary's executable takes no `-c`."""
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(sys, "frozen", frozen, raising=False)
    assert spawning.start_method() == method


def test_children_started_at_once_from_many_threads_leave_the_parents_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The safe path is set in the parent's environment around each start only: starts that overlap
    in time (a node's harness and its challenge child, eight threads here) never leave it behind for
    the processes the parent starts later."""
    monkeypatch.setenv("PYTHONSAFEPATH", "")  # so that the undo puts back what the run had,
    monkeypatch.delenv("PYTHONSAFEPATH")  # whatever a leak left
    go = threading.Barrier(8)
    answers: list[object] = []

    def start() -> None:
        go.wait()
        answers.append(_answer(start_child(Entry(__name__, "_cpus"), (), name="sark-test")))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8
    assert "PYTHONSAFEPATH" not in os.environ
