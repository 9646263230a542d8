"""The import graph, read from the source with `ast` (nothing imported): no circles, no arrows up.

An import anywhere in a file counts: at module level, inside a function, under `if TYPE_CHECKING`.
An edge goes to the module an import names: `from a.b import c` is an edge to `a.b.c` when that is a
module, else to the package `a.b` (its `__init__`). A package's `__init__` that re-exports its
modules is an edge from the package to each; the package a module sits in is not an edge from it
(Python runs it first, but no module of ours imports its own package's root).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UP = frozenset({"node", "gate"})  # the I/O layers: nothing below them imports them

Graph = Mapping[str, Set[str]]


def module_name(path: Path, root: Path = ROOT) -> str:
    """`scheduler/state/machine.py` -> `scheduler.state.machine`; a package's `__init__` is its name."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, here: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement may reach: a module, or a module's attribute."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        anchor = here.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    yield from (f"{base}.{alias.name}" for alias in node.names)


def _resolve(name: str, modules: Set[str]) -> str | None:
    """The longest prefix of `name` that is one of `modules`, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if (candidate := ".".join(parts[:end])) in modules:
            return candidate
    return None


def import_graph(package: str, root: Path = ROOT) -> Graph:
    """Each module of `package` (its subpackages included) -> the modules of `package` it imports."""
    return joint_graph((package,), root)


def joint_graph(packages: tuple[str, ...], root: Path = ROOT) -> Graph:
    """Each module of the `packages` -> the modules of any of them it imports."""
    paths = sorted(p for package in packages for p in (root / package).rglob("*.py"))
    modules = {module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in _imports(path):
            for target in _imported(node, name, path.name == "__init__.py"):
                if (hit := _resolve(target, modules.keys())) is not None and hit != name:
                    found.add(hit)
        graph[name] = found
    return graph


def _imports(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every import statement in the file, wherever it stands (read once per version of the file:
    this module's tests read the same 320 files some ten times)."""
    return _imports_of(path, path.stat().st_mtime_ns)


@functools.cache
def _imports_of(path: Path, version: int) -> tuple[ast.Import | ast.ImportFrom, ...]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def imports_outside(package: str, tops: Set[str], root: Path = ROOT) -> list[str]:
    """`module -> imported` for every import in `package` of a name under one of `tops`."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        name = module_name(path, root)
        for node in _imports(path):
            is_package = path.name == "__init__.py"
            found += [f"{name} -> {t}" for t in _imported(node, name, is_package) if t.split(".")[0] in tops]
    return sorted(set(found))


def circles(graph: Graph) -> list[list[str]]:
    """Every strongly connected part of more than one module (Tarjan), each sorted: the circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while (top := stack.pop()) != node:
                part.append(top)
            part.append(node)
            if len(part) > 1 or node in graph.get(node, ()):
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def package_graph(graph: Graph, package: str) -> Graph:
    """The module graph folded onto `package`'s subpackages (and its own top-level modules)."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == package:
            continue  # the root __init__ re-exports every part: it sits above them all
        folded.setdefault(part(module), set()).update(part(t) for t in targets if t != package)
    return {k: v - {k} for k, v in folded.items()}


@pytest.mark.parametrize("package", ["scheduler", "drivers", "node"])
def test_no_import_circle_among_a_packages_modules(package: str) -> None:
    graph = import_graph(package)
    assert len(graph) > 10, "the scan found almost no module: it is not looking"
    assert circles(graph) == []


def test_schedulers_packages_import_each_other_without_a_circle() -> None:
    """Each subpackage's `__init__` imports its modules, so a circle between two packages is a module
    that runs against a half-built package, whatever the modules' own graph says."""
    folded = package_graph(import_graph("scheduler"), "scheduler")
    parts = {"scheduler.language", "scheduler.state", "scheduler.verification", "scheduler.results"}
    assert parts <= set(folded)
    assert circles(folded) == []


# scheduler's packages, each built only on those before it (scheduler/__init__.py says why)
SCHEDULER_ORDER = ("errors", "language", "verification", "state", "results")


def test_each_scheduler_package_imports_only_those_before_it() -> None:
    folded = package_graph(import_graph("scheduler"), "scheduler")
    order = [f"scheduler.{name}" for name in SCHEDULER_ORDER]
    assert sorted(folded) == sorted(order), "a new package: place it in SCHEDULER_ORDER"
    later = {p: sorted(set(folded[p]) - set(order[: order.index(p)])) for p in order}
    assert {p: up for p, up in later.items() if up} == {}


# node's subpackages and top modules, each built only on those before it (node/__init__.py says why),
# with the gate role between node's host and the CLI that composes it
NODE_ORDER = (
    "errors", "build", "isolation", "events", "datadir", "config", "service", "ownerkey", "campaignfiles",
    "intake", "p2p", "transfer", "report", "submitter", "worker", "http", "GATE", "cli",
)  # fmt: skip


def _node_and_gate() -> Graph:
    """node folded onto its subpackages and top modules, and the gate role folded onto `gate`."""
    graph = joint_graph(("node", "gate"))

    def part(module: str) -> str:
        return "gate" if module.split(".")[0] == "gate" else ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == "node":
            continue  # the root's docstring lists the parts; it imports none
        folded.setdefault(part(module), set()).update(part(t) for t in targets if t != "node")
    return {k: v - {k} for k, v in folded.items()}


def test_node_and_the_gate_role_import_each_other_without_a_circle() -> None:
    folded = _node_and_gate()
    assert {"node.submitter", "node.report", "node.intake", "gate", "node.cli"} <= set(folded)
    assert circles(folded) == []


def test_each_node_part_and_the_gate_import_only_those_before_them() -> None:
    folded = _node_and_gate()
    order = ["gate" if name == "GATE" else f"node.{name}" for name in NODE_ORDER]
    assert sorted(folded) == sorted(order), "a new part of node: place it in NODE_ORDER"
    later = {p: sorted(set(folded[p]) - set(order[: order.index(p)])) for p in order}
    assert {p: up for p, up in later.items() if up} == {}


# drivers' rooms, each built only on those before it (drivers/__init__.py says what each holds)
DRIVERS_ORDER = ("errors", "files", "runtimes", "measuring", "endpoint", "probe")


def test_each_drivers_room_imports_only_those_before_it() -> None:
    folded = package_graph(import_graph("drivers"), "drivers")
    order = [f"drivers.{name}" for name in DRIVERS_ORDER]
    assert sorted(folded) == sorted(order), (
        "a new room or a module outside the rooms: place it in DRIVERS_ORDER"
    )
    later = {p: sorted(set(folded[p]) - set(order[: order.index(p)])) for p in order}
    assert {p: up for p, up in later.items() if up} == {}


@pytest.mark.parametrize(
    "package",
    ["protocol", "scheduler", "drivers"],
)
def test_no_arrow_up_into_node_or_gate(package: str) -> None:
    assert imports_outside(package, UP) == []


def _tree(tmp_path: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_scan_sees_a_circle_through_a_function_level_and_a_relative_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import x\n",
            "pkg/a.py": "from pkg.sub import b\nx = 1\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "def f() -> None:\n    from ..c import y\n",
            "pkg/c.py": "import pkg.a\ny = 2\n",
            "pkg/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.e import z\n",
            "pkg/e.py": "from pkg import d\nz = 3\n",
            "pkg/f.py": "from pkg.c import y\n",
        },
    )
    graph = import_graph("pkg", root)
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"], ["pkg.d", "pkg.e"]]


def test_the_scan_sees_a_circle_between_packages_and_an_arrow_up(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.one.a import x\nfrom pkg.two.b import y\n",
            "pkg/one/__init__.py": "",
            "pkg/one/a.py": "from pkg.two.b import y\nx = 1\n",
            "pkg/two/__init__.py": "",
            "pkg/two/b.py": "y = 2\n",
            "pkg/two/c.py": "from pkg.one.a import x\nfrom node.build import FROZEN\n",
        },
    )
    graph = import_graph("pkg", root)
    assert circles(graph) == []
    assert circles(package_graph(graph, "pkg")) == [["pkg.one", "pkg.two"]]
    assert imports_outside("pkg", UP, root) == ["pkg.two.c -> node.build.FROZEN"]
