"""The pure layers stay pure: `protocol` and `scheduler` load no networking, clock or randomness."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PURE = ("protocol", "scheduler")
# Foreign modules a pure layer must never load, and our own packages that do I/O.
FORBIDDEN_LOADED = ("trio", "libp2p", "multiaddr", "node", "gate", "drivers")
# What the pure layers' own source may not import (ARCHITECTURE.md "Layout"): I/O, clock, randomness, logging.
FORBIDDEN_IMPORTS = frozenset(
    {"trio", "libp2p", "multiaddr", "socket", "time", "random", "secrets", "logging", "asyncio", "threading",
     "subprocess", "node", "gate", "drivers"}
)  # fmt: skip

PROBE = """
import json, sys
import protocol, scheduler
for name in list(protocol.__all__):
    getattr(protocol, name)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_after_import() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_importing_the_pure_layers_loads_no_networking_of_ours_or_libp2p() -> None:
    loaded = _loaded_after_import()
    assert "protocol.machine" in loaded  # the probe really imported the package
    offending = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN_LOADED)
    assert offending == []


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", [p for pkg in PURE for p in sorted((ROOT / pkg).rglob("*.py"))], ids=str)
def test_pure_source_imports_nothing_impure(path: Path) -> None:
    assert _imports(path) & FORBIDDEN_IMPORTS == set()


def test_the_import_scan_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom trio import sleep\nfrom protocol import codec\n")
    assert _imports(bad) & FORBIDDEN_IMPORTS == {"time", "trio"}


NODE = ROOT / "node"


def _node_modules_importing(top: str) -> list[str]:
    """Modules under node/ whose source imports the top-level package `top` (anywhere in the file)."""
    return sorted(str(p.relative_to(ROOT)) for p in NODE.rglob("*.py") if top in _imports(p))


def test_only_node_p2p_imports_libp2p() -> None:
    importers = _node_modules_importing("libp2p") + _node_modules_importing("multiaddr")
    assert importers, "the scan found no libp2p importer at all: it is not looking"
    assert [p for p in importers if not p.startswith("node/p2p/")] == []


def test_only_the_cli_imports_the_gate_role() -> None:
    importers = _node_modules_importing("gate")
    assert importers, "the embedded swarm composes the gate role in the CLI"
    assert [p for p in importers if not p.startswith("node/cli/")] == []


@pytest.mark.parametrize("package", sorted(p.parent.name for p in NODE.glob("*/__init__.py")))
def test_each_node_package_lists_its_modules(package: str) -> None:
    init = NODE / package / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    modules = sorted(p.stem for p in (NODE / package).glob("*.py") if p.stem != "__init__")
    assert [m for m in modules if f"\n    {m} " not in f"\n{doc}"] == []


ROOMED = (ROOT / "scheduler", ROOT / "drivers")


@pytest.mark.parametrize(
    "package",
    [p for top in ROOMED for p in (top, *sorted(q.parent for q in top.glob("*/__init__.py")))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_scheduler_drivers_and_each_of_their_rooms_list_their_modules_and_export_a_list(
    package: Path,
) -> None:
    tree = ast.parse((package / "__init__.py").read_text())
    doc = ast.get_docstring(tree) or ""
    parts = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    parts += [p.parent.name for p in package.glob("*/__init__.py")]
    assert parts, f"{package} has no modules: the scan is not looking"
    assert [m for m in sorted(parts) if f"\n    {m} " not in f"\n{doc}"] == []
    exported = [
        n
        for n in tree.body
        if (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")
        or (isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "__all__")
    ]
    assert exported, f"{package}/__init__.py has no __all__"
