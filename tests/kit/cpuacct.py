"""Where the suite's CPU goes, test by test: a pytest plugin that gives each xdist worker a cgroup of
its own (cgroup v1 `cpuacct`, as root) and reads it around every test.

    .venv/bin/python -m pytest -n 3 --dist loadfile -p kit.cpuacct        # README's command, measured
    .venv/bin/python -m kit.cpuacct /tmp/sark-cpuacct 40                  # the 40 largest, by CPU

Every process a test starts (nodes forked by `kit.zygote`, measuring children, `kit.load`'s spinners,
each a session of its own) stays in its worker's group, so a test's figure is the CPU its whole tree
spent while it ran, set-up and tear-down included (a module's fixture is counted with its first test).
Sampling `/proc` (docs/testing.md, before) missed processes shorter than the period and could not tell
two workers' children apart. Each worker writes `SARK_CPUACCT_OUT/<group>.json` (default
`/tmp/sark-cpuacct`): one `[test id, CPU-s, wall s]` per test. Without a writable cpuacct hierarchy
(not root, cgroup v2 alone) it says so once and measures nothing; the run is otherwise unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import ClassVar, Final

import pytest

ROOT: Final = Path("/sys/fs/cgroup/cpuacct")
OUT_ENV: Final = "SARK_CPUACCT_OUT"
DEFAULT_OUT: Final = Path("/tmp/sark-cpuacct")


class _Worker:
    group: ClassVar[Path | None] = None
    rows: ClassVar[list[tuple[str, float, float]]] = []


def _usage(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    group = ROOT / f"sark-{name}-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        warnings.warn(f"kit.cpuacct measures nothing: {group}: {exc}", stacklevel=1)
        return
    _Worker.group = group


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    group = _Worker.group
    if group is None:
        return (yield)
    cpu, wall = _usage(group), time.monotonic()
    try:
        return (yield)
    finally:
        _Worker.rows.append((item.nodeid, _usage(group) - cpu, time.monotonic() - wall))


def pytest_unconfigure(config: pytest.Config) -> None:
    group = _Worker.group
    if group is None:
        return
    out = Path(os.environ.get(OUT_ENV, DEFAULT_OUT))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{group.name}.json").write_text(json.dumps(_Worker.rows))
    with contextlib.suppress(OSError):  # the group goes once its last process has left it
        (ROOT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()


def report(folder: Path, top: int) -> str:
    """The measured run in `folder`: CPU by tier, then the `top` files and tests by CPU."""
    rows: list[tuple[str, float, float]] = []
    for path in sorted(folder.glob("*.json")):
        rows += [tuple(row) for row in json.loads(path.read_text())]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for test, cpu, wall in rows:
        file = files[test.split("::")[0]]
        file[0] += cpu
        file[1] += wall
    lines = [f"{len(rows)} tests, {sum(r[1] for r in rows):.0f} CPU-s"]
    for tier in ("tests/unit", "tests/labs"):
        lines.append(f"{tier}: {sum(c for f, (c, _) in files.items() if f.startswith(tier)):.0f} CPU-s")
    lines.append("files (CPU-s, wall s):")
    by_cpu = sorted(files.items(), key=lambda kv: -kv[1][0])[:top]
    lines += [f"{cpu:8.1f} {wall:8.1f}  {name}" for name, (cpu, wall) in by_cpu]
    lines.append("tests (CPU-s, wall s):")
    lines += [
        f"{cpu:8.1f} {wall:8.1f}  {test}" for test, cpu, wall in sorted(rows, key=lambda r: -r[1])[:top]
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(
        report(
            Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT,
            int(sys.argv[2]) if len(sys.argv) > 2 else 30,
        )
    )
