"""The suite writes bytecode (tests/conftest.py): a process it starts compiles a module of ours only if
no process before it did, even where the environment says PYTHONDONTWRITEBYTECODE (as the CI machine's
image does). Asserted on a child started as the labs start theirs, in a copy of a package of ours
with no bytecode yet: it writes the module's bytecode, and a second child reads it instead of
compiling the source again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_suite_and_the_processes_it_starts_write_bytecode(tmp_path: Path) -> None:
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert not sys.dont_write_bytecode
    shutil.copytree(ROOT / "protocol", tmp_path / "protocol", ignore=shutil.ignore_patterns("__pycache__"))
    child = [sys.executable, "-c", "import protocol.errors; print(protocol.errors.__cached__)"]
    first = subprocess.run(child, cwd=tmp_path, capture_output=True, text=True, check=True)
    cached = Path(first.stdout.strip())
    assert cached.parent == tmp_path / "protocol" / "__pycache__", first.stdout
    assert cached.is_file()
    written = cached.stat().st_mtime_ns
    subprocess.run(child, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert cached.stat().st_mtime_ns == written  # read, not compiled and written again
