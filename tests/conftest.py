"""Suite-wide test setup: only what every test folder needs.

The layout (README's test commands run it by tier):
    unit/<package>/<room>/  the fast tier: no swarm, no child process beyond a measuring child;
                            `unit/repository/` holds the checks of the whole tree (imports, layers, sizes)
    labs/<topic>/           real processes: gates, workers and submitters, serve, browsers, namespaces
    kit/                    what tests share: the process lab (`kit.procs`, its fork server `kit.zygote`),
                            fixtures, builders, liars
    golden/                 results files the renderers and checks read

Every test folder is a package (an `__init__.py`), so pytest puts `tests/` itself on `sys.path` and
imports a test as `unit.scheduler.state.test_machine`: names may repeat across folders, and `kit` is
importable everywhere. The repository root goes first on `sys.path` too, so that a bare
`.venv/bin/pytest` imports the real packages, never a test folder of the same name.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import Any

import pytest
import trio

ROOT = str(Path(__file__).resolve().parent.parent)
TESTS = str(Path(__file__).resolve().parent)
UNIT = Path(TESTS) / "unit"
for folder in (TESTS, ROOT):  # the root first
    if folder not in sys.path:
        sys.path.insert(0, folder)

# Bytecode is written, whatever the environment says: the labs start some 1,500 Python processes
# (nodes, their children, the kit's liars), and with PYTHONDONTWRITEBYTECODE set (the CI machine's
# image sets it) each one compiled our packages from source again, 0.25 CPU-s a node's imports
# (docs/testing.md). Set here, before xdist starts its workers, it reaches every process the suite
# starts; Python writes each file's bytecode atomically, so the first process to import a module
# writes it for the rest.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# The runtimes' OpenMP threads wait passively in every process the suite starts (libgomp, which
# torch's wheels carry, reads OMP_WAIT_POLICY as it loads: PASSIVE sets its spin count from 300,000
# to 0). README's command runs three test processes on two cores, so a waiting thread that spins
# takes a core from a lab's other processes and its own sibling thread: beside the suite at load 4,
# tests/labs/runtimes/test_llm.py took 57.5 and 40.5 CPU-s with torch's two threads spinning, 23.0
# and 22.8 waiting passively (one thread: 23.2, 22.6), tests/labs/e2e/test_generate.py 71.5 and 49.2.
# examples/serve_llm.py waits passively for the same reason. tests/labs/kit/test_passive_wait.py
# pins it on a child started as the labs start theirs.
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

# Fixtures every folder may use: the process lab and a worker's profile file (kit.fixtures), the
# campaign lab's swarms and model server (kit.campaignlab), and pytest's own `pytester` (a pytest run
# of a test's own: tests/labs/kit/test_cores.py runs this file's lock in one).
pytest_plugins = ("kit.fixtures", "kit.campaignlab", "pytester")


# Every trio test body runs under a trio deadline, below pytest-timeout's 300 s: a hung test fails
# with trio.TooSlowError and the traceback of the await it hung in, and its nursery unwinds (a
# pytest-timeout kill gives only a thread dump). pytest-trio runs fixtures in tasks of their own, so a
# fixture cannot put a cancel scope around the test; the test function itself is wrapped instead.
# A test that needs longer says so with `@pytest.mark.trio_deadline(seconds)`.
TRIO_DEADLINE_S = 240.0


@pytest.hookimpl(trylast=True)  # after pytest's own tmp_path plugin has made its factory
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "trio_deadline(seconds): the trio deadline of this test body (default 240 s)"
    )
    _set_probe_cache(config)
    _set_tmpdir(config)


# A test that compares timings measured here (replicas of one device class must agree within a band
# sized for a device measuring alone) is `exclusive`: under xdist it waits for the other workers'
# running tests to end and none starts until it ends, as a real device would not run someone else's
# suite beside a benchmark. Every other test holds the cores' lock shared. Writer first: a test
# passes the turnstile (held by an exclusive test while it waits for the cores) before taking its
# share, so a stream of shared tests on the other worker cannot starve an exclusive one. An exclusive
# test whose successor on this worker is exclusive too (the next test of its file, under `--dist
# loadfile`) keeps the lock for it: released between them, the other worker started its next test,
# up to minutes long, and the second waited for it while both cores but one test's sat idle (the CI
# run at a252ecf: 94 s in test_sender.py's second exclusive set-up).
class _Cores:
    """This worker's hold on the cores' lock: none, shared or exclusive."""

    def __init__(self) -> None:
        self.exclusive = False
        self.lock: Any = None

    def take(self, shared: Path, exclusive: bool) -> None:
        with open(shared / "cores.turnstile", "a") as turnstile:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                self.lock = open(shared / "cores.lock", "a")  # noqa: SIM115  (held across tests)
                fcntl.flock(self.lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                self.exclusive = exclusive
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)

    def release(self) -> None:
        if self.lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.lock, fcntl.LOCK_UN)
            self.lock.close()
        self.lock, self.exclusive = None, False


_CORES = _Cores()


def _is_exclusive(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """The cores' lock around the test's whole protocol (its set-up, call and tear-down), taken
    outside pytest-timeout's timer: `tryfirst` makes this wrapper the outer one, so the timer starts
    once the lock is held. A shared test waiting while an exclusive one waited for the cores and ran
    (over 300 s beside `kit.load 2`: the real-model verification's set-up waited 275 s, then ran
    133 s) is timed for its own work, never for that wait; the wait is bounded by the tests it waits
    for, each under its own timeout. Without xdist one process runs the tests one at a time."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return (yield)
    exclusive = _is_exclusive(item)
    if not (exclusive and _CORES.exclusive):  # held already for this one by the exclusive test before
        _CORES.release()
        _CORES.take(_shared(item.config), exclusive)
    try:
        return (yield)
    finally:
        if not (exclusive and _is_exclusive(nextitem)):
            _CORES.release()


def _shared(config: pytest.Config) -> Path:
    """One folder per run, shared by its xdist workers: the parent of this worker's base temporary
    folder. A hook is given no fixtures; the `tmp_path_factory` fixture itself returns
    `config._tmp_path_factory`, the one pytest keeps (a factory made anew would number a new folder)."""
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    return factory.getbasetemp().parent


# Every `sark-node` the tests start keeps its device probe in one folder of the run's, shared by its
# xdist workers (`SARK_PROBE_CACHE`, `drivers.probe.cache`): a worker or an embedded submit on this
# unchanged machine reuses the first one's facts and units instead of importing every runtime again
# (its calibration and declared servers are still taken at each start). A test of the probe itself
# calls it without a cache, or runs its command in a new user's environment (`kit.procs.user_env`).
# Set at configure time, before collection: a module may copy `os.environ` when imported. A folder
# the caller names is kept (benchmarks/probe_cache.py's side by side uses one).
PROBE_CACHE_ENV = "SARK_PROBE_CACHE"


def _run_folder(config: pytest.Config) -> Path:
    """The run's own temporary folder: pytest's base folder, shared by the xdist workers of one run."""
    base: Path = getattr(config, "_tmp_path_factory").getbasetemp()  # noqa: B009  (pytest's own, no public name)
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def _set_probe_cache(config: pytest.Config) -> None:
    if PROBE_CACHE_ENV not in os.environ:
        os.environ[PROBE_CACHE_ENV] = str(_run_folder(config) / "probe-cache")


def _set_tmpdir(config: pytest.Config) -> None:
    """Every process the suite starts keeps its temporary files in the run's own folder, which pytest
    removes with the run's other folders (it keeps the last three). A node killed by a lab (SIGKILL,
    as a fault lab means it) leaves its measuring child's folder and multiprocessing's fork-server
    folder behind; in /tmp that was some 600 folders a run (`sark-child-*`, `pymp-*`)."""
    folder = _run_folder(config) / "tmp"
    folder.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # read again from TMPDIR by this process's next temporary file


# The product writes a campaign's files to `sark-results/` under its working directory unless told
# `--out`. A lab's processes run in the lab's own folder (`kit.procs.Lab.start`, `Swarm.run`); before,
# they ran in the caller's, this checkout, and a resumed fleet campaign (tests/labs/e2e/test_recovery.py)
# and a resumed swarm campaign (tests/labs/e2e/test_resume_swarm.py) left their folders in it. The
# run's controller fails the run when a campaign folder appeared in the checkout during it.
CHECKOUT_RESULTS = Path(ROOT) / "sark-results"
_RESULTS_BEFORE = pytest.StashKey[frozenset[str]]()


def _checkout_results() -> frozenset[str]:
    return frozenset(os.listdir(CHECKOUT_RESULTS)) if CHECKOUT_RESULTS.is_dir() else frozenset()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (a pytester run inherits the env)
        session.config.stash[_RESULTS_BEFORE] = _checkout_results()


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_RESULTS_BEFORE, None)
    left = sorted(_checkout_results() - before) if before is not None else []
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")  # xdist's progress line does not end itself
            reporter.write_line(f"error: tests wrote campaign folders into {CHECKOUT_RESULTS}: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _under_deadline(test: Callable[..., Awaitable[None]], seconds: float) -> Callable[..., Awaitable[None]]:
    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> None:
        with trio.fail_after(seconds):
            await test(*args, **kwargs)

    return bounded


def _handed_out(item: pytest.Item) -> tuple[bool, bool]:
    """Where a test's file stands in the order xdist hands files out (`--dist loadfile` takes the
    collection order): the labs, then the unit tier's `heavy` files, then its other files, each group
    in collection order. A heavy file handed out late was one worker's tail while the others idled
    (the fast tier's replication simulation, 13.7 s, began at 185 s of 199)."""
    return item.path.is_relative_to(UNIT), item.get_closest_marker("heavy") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_handed_out)  # stable: a file's tests stay together and in their order
    wanted = "slow" in (config.getoption("markexpr") or "")
    for item in items:
        if item.get_closest_marker("slow") is not None and not wanted:
            item.add_marker(pytest.mark.skip(reason="slow: not in the default suite; run with `-m slow`"))
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            marker = item.get_closest_marker("trio_deadline")
            seconds = float(marker.args[0]) if marker is not None else TRIO_DEADLINE_S
            item.obj = _under_deadline(item.obj, seconds)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Lists a test recorded for review (a `record_property` named "review: ..."), e.g. the modules
    over 400 lines (tests/unit/repository/test_sizes.py): a signal in the summary, never a failure."""
    for report in terminalreporter.stats.get("passed", []):
        for name, listed in getattr(report, "user_properties", ()):
            if str(name).startswith("review:") and listed:
                terminalreporter.write_sep("-", f"{str(name)[len('review:') :].strip()}, for review")
                for line in listed:
                    terminalreporter.write_line(str(line))
