"""Suite-wide test setup: only what every test folder needs.

The repository root goes first on `sys.path`. Test folders are named after the packages they test
(`tests/protocol`, `tests/scheduler`) and pytest puts `tests/` itself on `sys.path` (rootdir-based
imports), so without the root there a bare `.venv/bin/pytest` would import `tests/scheduler` as a
namespace package called `scheduler` instead of the real one. `python -m pytest` adds the working
directory by itself; this makes both ways of running the suite import the same code.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
