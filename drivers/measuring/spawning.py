"""The one way `drivers` starts a child: spawned, apart from Ctrl-C, from the caller's folder, and capped.

Every child the drivers start (the measuring child, the device probe, the token counter) starts
here, with `start_child`:

- **Ctrl-C.** A terminal sends Ctrl-C's SIGINT to its whole foreground process group: the node and
  every child it spawned. The parent decides what stops (the submitter withdraws its tasks, the
  worker cancels and reaps its children); a child that took the signal itself would print a
  `KeyboardInterrupt` traceback from wherever it was (importing torch, loading a model) and report a
  failure that is not one. The child is started with SIGINT blocked in the starting thread, so it
  begins life with it blocked (the mask survives fork and exec, and Python then keeps its own
  handler unarmed); its first step ignores the signal (discarding one already pending) and unblocks it.
- **The caller's folder.** multiprocessing's `spawn` gives the child the parent's `sys.path`, with
  "" replaced by the folder the parent started in, and changes into the parent's current folder
  (`multiprocessing.spawn.get_preparation_data`): a `yaml.py` in the folder the user ran the command
  from would be imported by the child. The child's first step drops those entries from `sys.path`
  (unless our own packages live there: a source checkout) and changes into an empty folder of its
  own, which the parent made and removes once the child has ended; only then does it import its
  entry and unpickle its job. (Before that step only multiprocessing's own bootstrap runs, started
  with PYTHONSAFEPATH so that "" is not on its path either: `_safe_path`.)
- **Limits.** `Limits` are taken by the child once its entry is imported, before its job is read;
  `cap_address_space` is the one place `RLIMIT_AS` is set (a child that caps itself later, as the
  measuring child does for a task's memory limit, calls it too).
- **A crash, located.** Once apart, the child writes Python's fault handler to a file in its own
  folder: a child killed by a signal in a runtime's code (SIGSEGV in a native library) leaves the
  Python frame it died in, which `Child.ended` and `Child.crash_site` name for the failure's reason.
- **Start.** The child says `STARTED` once it is apart, capped and has imported its entry. A child
  that cannot be started, or ends before that, did not start: `NotStarted`, with the reason, never
  read as a crash or as a memory limit hit.
- **Forked from a server that imported once** (Linux, not the frozen binary: `start_method`). Each
  child used to spend 0.2-0.4 CPU-s importing `protocol`, numpy and its entry before its job began
  (1,300 children, a third of the test suite's CPU). On Linux a child is forked by multiprocessing's
  fork server, one process per node that imported `drivers.measuring.forkhost` (Ctrl-C ignored, then
  the measuring children's modules) and nothing else: no runtime, no model, no thread but numpy's
  pool, which is fork-aware. A forked child is still a process of its own that loads its model
  fresh and whose memory peak is reset before it is read (`meters.reset_peak`). It gets the parent's
  `sys.path` and current folder as a spawned one does (multiprocessing's preparation data), then
  steps aside as above, and its first step sets the parent's environment and CPU affinity as they
  are at the start (the server's are the ones the node had when its first child started). What
  Python reads only as it starts (PYTHONPATH's `sitecustomize`, as the labs' paced workload uses) is
  the server's.
  Elsewhere (macOS, where fork after the system frameworks is unsafe; a frozen binary, whose
  executable takes no `-c`), `spawn` as before.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import pickle
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context, process, resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final

from drivers.errors import DriverError

STARTED: Final = "started"
NOT_STARTED: Final = "not_started"
MIB: Final = 1 << 20
OURS: Final = os.path.realpath(Path(__file__).resolve().parents[2])
"""The folder our packages (drivers, protocol, ...) are imported from: kept on a child's sys.path."""
CRASH_FILE: Final = "crash.txt"
"""The file in a child's folder where Python's fault handler writes the stack a fatal signal met."""
CRASH_READ: Final = 16 * 1024  # the most of that file read back
FORKHOST: Final = "drivers.measuring.forkhost"
"""What the fork server imports before it forks its first child (see the module docstring)."""
_STARTING: Final = threading.Lock()  # one start at a time holds the safe path: `_safe_path`


def start_method() -> str:
    """How children start here: `forkserver` on Linux from a source install, `spawn` elsewhere."""
    frozen = getattr(sys, "frozen", False)
    return (
        "forkserver"
        if sys.platform == "linux" and not frozen and "forkserver" in get_all_start_methods()
        else "spawn"
    )


def _context() -> ForkServerContext | SpawnContext:
    if start_method() == "forkserver":
        server = get_context("forkserver")
        server.set_forkserver_preload([FORKHOST])
        return server
    return get_context("spawn")


class NotStarted(DriverError):
    """A child could not be started, or ended before its entry ran (`detail` says why)."""


@dataclass(frozen=True)
class Entry:
    """A child's entry, named (the parent never imports it): `module.function(conn, *args)`."""

    module: str
    function: str


@dataclass(frozen=True)
class Limits:
    """What the child is capped at before its entry runs.

    Attributes:
        address_space_mb: the soft address-space cap, above the child's own size at that moment.
    """

    address_space_mb: int | None = None


@dataclass
class Child:
    """A started child: its process, the end of its pipe the parent reads, its folder."""

    process: BaseProcess
    receiver: Connection
    folder: str
    started: bool = False

    def receive(self) -> tuple[Any, ...] | None:
        """The child's next message (call once the pipe is readable), None once it closed its end.

        Raises:
            NotStarted: the child could not run its entry (the message says why).
        """
        try:
            message: tuple[Any, ...] = self.receiver.recv()
        except EOFError:
            return None
        if message[0] == STARTED:
            self.started = True
        elif message[0] == NOT_STARTED:
            raise NotStarted(f"the child did not start: {message[1]}")
        return message

    def ended(self) -> str:
        """Why a child that closed its pipe without a last message ended (call after `join`)."""
        code = self.process.exitcode
        how = f"exited with code {code}"
        if code is not None and code < 0:
            how = f"died of {signal.Signals(-code).name}"
            site = self.crash_site()
            how += f" {site}" if site else ""
        return f"the child {how} and no result" if self.started else f"the child did not start: it {how}"

    def crash_site(self) -> str:
        """Where a child killed by a fatal signal died, from its fault handler's file ("" when it left
        none): the innermost Python frame of the thread that met it, as `in function (file.py:line)`."""
        try:
            with open(os.path.join(self.folder, CRASH_FILE), "rb") as trace:
                text = trace.read(CRASH_READ).decode("utf-8", "replace")
        except OSError:
            return ""
        return crash_site(text)

    def stop(self) -> None:
        """Kill the child if it still runs, reap it, close the pipe and remove its folder (blocking:
        moments once the child has been killed or has sent its last message)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.receiver.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def crash_site(trace: str) -> str:
    """Where the thread that met the fatal signal was, from a fault handler's `trace` (faulthandler
    writes that thread first, as "Current thread", most recent call first): its innermost Python
    frame, and the innermost of ours below it when that one is a library's
    (`in string_at (ctypes/__init__.py:519) from open_model (drivers/runtimes/gguflm.py:88)`)."""
    frames = []
    for line in trace.splitlines():
        frame = _FRAME.match(line)
        if frame:
            frames.append(frame)
        elif frames:
            break  # the end of the current thread's frames
    if not frames:
        return ""
    site = f"in {_frame_name(frames[0])}"
    ours = next((frame for frame in frames if _ours(frame["file"])), None)
    if ours is not None and ours is not frames[0]:
        site += f" from {_frame_name(ours)}"
    return site


def _ours(file: str) -> bool:
    """A source file of this checkout's (not "<frozen importlib._bootstrap>", not an install's)."""
    return (
        os.path.isabs(file)
        and os.path.realpath(file).startswith(OURS + os.sep)
        and "site-packages" not in file
    )


def _frame_name(frame: re.Match[str]) -> str:
    file = os.path.realpath(frame["file"])
    shown = os.path.relpath(file, OURS) if _ours(file) else os.path.join(*Path(file).parts[-2:])
    return f"{frame['function']} ({shown}:{frame['line']})"


def start_child(
    entry: Entry, args: tuple[object, ...], *, name: str, limits: Limits | None = None, duplex: bool = False
) -> Child:
    """Start `entry` in a fresh child (`start_method`), apart (see the module docstring), with `args` pickled.

    The child's entry receives the sending end of a one-way pipe first; the parent reads the other.
    `duplex`: the pipe goes both ways (the parent sends on `Child.receiver` too: a child that waits
    for its input, as the challenge child waits for a seed that must not exist before it is sent).

    Raises:
        NotStarted: the system refused to start the process (no memory, no process slot, ...).
    """
    ctx = _context()
    folder = tempfile.mkdtemp(prefix="sark-child-")
    receiver, sender = ctx.Pipe(duplex=duplex)
    payload = pickle.dumps(args)
    child = ctx.Process(
        target=_entry,
        args=(sender, entry, payload, folder, limits or Limits(), dict(os.environ), _affinity()),
        name=name,
        daemon=True,
    )
    try:
        _start_apart(child)
    except (OSError, ValueError) as exc:
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise NotStarted(f"the child did not start: {type(exc).__name__}: {exc}") from exc
    finally:
        sender.close()
    return Child(child, receiver, folder)


def _start_apart(child: BaseProcess) -> None:
    """Start `child` with SIGINT blocked for it from its first instruction; this thread's mask is
    restored at once (a Ctrl-C that came meanwhile is delivered then).

    multiprocessing starts its resource tracker with the first spawned child and unblocks SIGINT in
    the starting thread when it has (resource_tracker.ensure_running): it is started first, here.
    A forked child takes its mask and handlers from the fork server instead, which ignores Ctrl-C
    from its first import on (`forkhost`); the server itself starts inside this block.
    """
    with _safe_path():
        resource_tracker.ensure_running()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            child.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _safe_path() -> Iterator[None]:
    """PYTHONSAFEPATH in the environment the child (and the resource tracker) inherit, for the start.

    spawn starts the child as ``python -c ...``, which puts "" (the current folder) first on its path
    while multiprocessing's own bootstrap imports (pickle, socket, ...): a `pickle.py` in the folder the
    node was started from would run there, before `_entry` can step aside. Python 3.11's safe path
    leaves "" out; spawn's API takes no environment, so the parent's is set around the start only,
    one start at a time: two that overlapped would each restore what the other set, and the last to
    finish would leave the safe path behind for every process the parent starts later.
    """
    with _STARTING:
        before = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            if before is None:
                del os.environ["PYTHONSAFEPATH"]
            else:
                os.environ["PYTHONSAFEPATH"] = before


def _affinity() -> set[int] | None:
    """The CPUs this process may run on (None where the system does not say: macOS)."""
    getter = getattr(os, "sched_getaffinity", None)
    return set(getter(0)) if getter is not None else None


def _entry(
    conn: Connection,
    entry: Entry,
    payload: bytes,
    folder: str,
    limits: Limits,
    environ: dict[str, str],
    affinity: set[int] | None,
) -> None:
    """The child's first step: apart from Ctrl-C and the caller's folder, capped, with the parent's
    environment and CPUs as they are now (a forked child has the fork server's, from its start: a
    parent pinned to a core since then, as `taskset` or a lab pins one, pins its child too); then its
    entry."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        if affinity is not None:
            with contextlib.suppress(OSError):  # a CPU gone offline since: the server's stay
                os.sched_setaffinity(0, affinity)
        _leave_callers_folder(folder)
        _CRASH.append(open(CRASH_FILE, "w"))  # noqa: SIM115 (open until the process ends)
        faulthandler.enable(_CRASH[-1])
        os.environ.clear()
        os.environ.update(environ)
        function = getattr(importlib.import_module(entry.module), entry.function)
        if limits.address_space_mb is not None:
            # no /proc (macOS): the parent's deadline still bounds the child
            with contextlib.suppress(OSError, ValueError):
                cap_address_space(limits.address_space_mb * MIB)
        args = pickle.loads(payload)
    except Exception as exc:  # the child's boundary: the parent gets the reason
        text = str(exc).strip()
        conn.send((NOT_STARTED, f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"))
        conn.close()
        return
    conn.send((STARTED,))
    function(conn, *args)


_CRASH: list[Any] = []  # the child's fault-handler file, held open for its whole life


def _leave_callers_folder(folder: str) -> None:
    """Drop the caller's folders from sys.path (ours stay) and change into `folder`."""
    here = os.getcwd()  # the parent's current folder, which spawn changed into
    started_in = getattr(process, "ORIGINAL_DIR", None) or here  # what spawn put in place of ""
    callers = {os.path.realpath(here), os.path.realpath(started_in)}
    kept = []
    for entry in sys.path:
        real = os.path.realpath(entry or here)
        if real in callers and real != OURS:
            continue
        kept.append(real if entry == "" else entry)
    sys.path[:] = kept
    os.chdir(folder)


def process_size() -> int:
    """This process's address space in bytes (/proc/self/statm).

    Raises:
        OSError: there is no /proc (macOS).
    """
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def cap_address_space(extra_bytes: int, *, lock: bool = False) -> tuple[int, int]:
    """Cap this process's address space at its size now plus `extra_bytes`; returns the limits it
    replaced (`restore_address_space` puts them back).

    The soft limit only, under the hard one, so that it can be restored and a later cap still set;
    `lock`: the hard limit too, so that nothing in this process can raise it again.

    Raises:
        OSError: the size cannot be read (no /proc).
        ValueError: the system refuses the limit.
    """
    previous = resource.getrlimit(resource.RLIMIT_AS)
    hard = previous[1]
    cap = process_size() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap if lock else hard))
    return previous


def restore_address_space(previous: tuple[int, int]) -> None:
    """Put back the limits `cap_address_space` replaced (not after `lock`)."""
    resource.setrlimit(resource.RLIMIT_AS, previous)


@contextlib.contextmanager
def address_space_capped(extra_bytes: int) -> Iterator[None]:
    """The soft cap of `cap_address_space` over a `with` block, restored after it."""
    previous = cap_address_space(extra_bytes)
    try:
        yield
    finally:
        restore_address_space(previous)


__all__ = [
    "NOT_STARTED",
    "STARTED",
    "Child",
    "Entry",
    "Limits",
    "NotStarted",
    "address_space_capped",
    "cap_address_space",
    "process_size",
    "restore_address_space",
    "start_child",
]
