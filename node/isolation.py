"""How the node starts a child that reads untrusted files: apart from the caller's folder and environment.

``python -m MODULE`` puts the working directory first on ``sys.path``: a ``yaml.py`` or
``resource.py`` beside a campaign would run inside the very child meant to contain the campaign's
hostile files. So a child is started with ``-I`` (isolated mode: no working directory or script
folder on the path, no ``PYTHON*`` variables, no user site), in an empty working directory the
caller makes, with `child_env` (a few variables a process needs, never the caller's API keys). ``-I``
also ignores ``PYTHONPATH``: the folder the running ``node`` package was imported from is appended to
the child's path (after the standard library and site-packages), so a checkout run without an
install still finds its own code, and nothing in that folder can shadow a module that is installed.

The frozen binary has no working directory on its path (PyInstaller) and no ``-I``: its children are
``sark-node -m MODULE`` (see ``.ci/sark-node-entry.py``).

A child writes `STARTED` as its first stdout line once its imports and limits are in place, so the
parent can tell a child that could not start (a broken install) from one stopped at a limit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

STARTED: Final = b"started"
"""The child's first stdout line, written once it imported its code and set its limits."""
KEPT_VARIABLES: Final = (
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LD_LIBRARY_PATH",
    "SYSTEMROOT",
)
"""The caller's environment variables a child keeps; all others (keys, ``PYTHON*``) are left out."""
# alter_sys: the module is `sys.modules["__main__"]` while it runs, as under ``python -m`` and in the
# binary (.ci/sark-node-entry.py), so that pydantic finds the names a model defined there refers to.
_RUN: Final = (
    "import runpy, sys; sys.path.append({root!r}); "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, *args: str) -> tuple[str, ...]:
    """The command line that runs `module` as ``python -m`` would, isolated (see the module docstring)."""
    if getattr(sys, "frozen", False):
        return (sys.executable, "-m", module, *args)
    root = str(Path(__file__).resolve().parents[1])
    return (sys.executable, "-I", "-c", _RUN.format(root=root, module=module), *args)


def child_env() -> dict[str, str]:
    """The environment of an isolated child: `KEPT_VARIABLES` where the caller has them."""
    return {name: os.environ[name] for name in KEPT_VARIABLES if name in os.environ}


def started(stdout: bytes) -> tuple[bool, bytes]:
    """Whether the child said it started, and the rest of its stdout after that line."""
    first, _, rest = stdout.partition(b"\n")
    return first == STARTED, rest


def start_failure(returncode: int, stderr: bytes) -> str:
    """Why a child did not start, for people: its exit code and the last line it wrote on stderr."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    last = lines[-1][:300] if lines else "nothing on stderr"
    return f"exit code {returncode}: {last}"
