"""What this program is: its version, the commit it was built from, and how it was installed.

The binary (PyInstaller, `.ci/binary`) carries ``build.json`` beside this module, written at build
time: version, commit, and a kind such as ``binary linux-x86_64``. A pip install reads its version
from the package metadata and its commit from git when the code sits in a checkout (else
``unknown``). Only the standard library is imported, and only when asked: ``sark-node --version``
stays instant. (The drivers word a missing runtime for the build themselves: `drivers.runtimes.missing`.)
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

FROZEN: Final = bool(getattr(sys, "frozen", False))
"""True in the binary (a PyInstaller app), False under a Python interpreter."""
ROOT: Final = Path(__file__).resolve().parent.parent
FACTS: Final = Path(__file__).resolve().with_name("build.json")
_DIST: Final = "sark-node"


@dataclass(frozen=True)
class Build:
    """The running program's version, commit and build kind.

    Attributes:
        version: the package version (``0.1.0``).
        commit: the git commit, short (``1cc057b``, ``+dirty`` when the binary was built from a tree
            with changes), or ``unknown``.
        kind: ``binary <os>-<arch>``, ``pip editable``, ``pip``, or ``source checkout`` (the code runs
            from a folder no installed distribution points at, e.g. through PYTHONPATH).
    """

    version: str
    commit: str
    kind: str

    def line(self) -> str:
        """What ``sark-node --version`` prints."""
        return f"sark-node {self.version} (commit {self.commit}, {self.kind})"


@functools.cache
def current() -> Build:
    """This program's build: baked facts in the binary, metadata and git under Python."""
    if FROZEN:
        facts = json.loads(FACTS.read_text())
        return Build(str(facts["version"]), str(facts["commit"]), str(facts["kind"]))
    version, kind = _installed()
    return Build(version, _git_commit(), kind)


def _installed() -> tuple[str, str]:
    import importlib.metadata
    from urllib.parse import unquote, urlsplit

    dists = list(importlib.metadata.distributions(name=_DIST))
    version = dists[0].version if dists else "unknown"
    if not (ROOT / "pyproject.toml").exists():
        return version, "pip"  # the packages sit in site-packages, not in a source tree
    for dist in dists:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        target = Path(unquote(urlsplit(direct.get("url", "")).path))
        if direct.get("dir_info", {}).get("editable") and target.resolve() == ROOT:
            return version, "pip editable"
    return version, "source checkout"


def _git_commit() -> str:
    import subprocess

    if not (ROOT / ".git").exists():
        return "unknown"
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


__all__ = ["FROZEN", "Build", "current"]
