"""Build facts: `sark-node --version` names version, commit and build kind, cheaply; a missing runtime
is worded for the build it is missing from (pip: the extra to install; the binary: not in this build)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.runtimes.missing import not_installed
from node.build import Build, current

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import json, sys
from node.cli import main
sys.argv = ["sark-node", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
# What --version may not load beyond what --help loads.
HEAVY = ("pydantic", "protocol", "scheduler", "drivers", "libp2p", "onnxruntime", "matplotlib", "torch")


def _cli(args: list[str], home: Path) -> tuple[str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_version_line_names_version_commit_and_kind(tmp_path: Path) -> None:
    out, _ = _cli(["--version"], tmp_path)
    match = re.fullmatch(r"sark-node (\S+) \(commit (\S+), (pip editable|pip|source checkout)\)\n", out)
    assert match is not None, out
    if shutil.which("git") and (ROOT / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert match.group(2) == head.stdout.strip()
    command, _ = _cli(["version"], tmp_path)
    assert command == out


def test_version_loads_nothing_heavy_beyond_help(tmp_path: Path) -> None:
    _, helped = _cli(["--help"], tmp_path)
    _, versioned = _cli(["--version"], tmp_path)
    extra = sorted(m for m in versioned - helped if m.split(".")[0] in HEAVY)
    assert "node.build" in versioned
    assert extra == []


def test_the_running_build_is_read_from_metadata_and_git() -> None:
    build = current()
    assert build.kind in ("pip editable", "pip", "source checkout")
    assert build.line() == f"sark-node {build.version} (commit {build.commit}, {build.kind})"


def test_version_line_of_a_binary() -> None:
    build = Build("0.1.0", "1cc057b", "binary linux-x86_64")
    assert build.line() == "sark-node 0.1.0 (commit 1cc057b, binary linux-x86_64)"


@pytest.mark.parametrize(
    ("frozen", "expected"),
    [
        (False, "torch not installed (install sark-node[torch])"),
        (
            True,
            "torch not in this build (the binary carries onnxruntime only; install sark-node with pip "
            "and the torch extra for PyTorch units)",
        ),
    ],
)
def test_missing_runtime_is_worded_for_the_build(frozen: bool, expected: str) -> None:
    assert not_installed(["torch"], "torch", "PyTorch units", frozen=frozen) == expected
