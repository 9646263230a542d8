"""How a missing runtime is worded, truthful for the build it is missing from.

A pip install names the extra that brings it; the binary (PyInstaller, `.ci/binary`), which carries
onnxruntime only, says "not in this build". The drivers word it themselves: `node.build` (the
binary's version facts) is above them, and `sark-node --version` keeps `drivers` unloaded, so each
side reads `sys.frozen` on its own.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

FROZEN: Final = bool(getattr(sys, "frozen", False))
"""True in the binary (a PyInstaller app), False under a Python interpreter."""


def not_installed(packages: Sequence[str], extra: str, units: str, frozen: bool = FROZEN) -> str:
    """Why a runtime's units are unavailable when its packages are absent, truthful for this build.

    Args:
        packages: the missing import names (``torch``, ``transformers``).
        extra: the pip extra of sark-node that brings them (``torch``, ``llm``).
        units: what they give, for the binary's sentence (``PyTorch units``, ``generation``).
        frozen: whether this is the binary (defaults to the running program).
    """
    names = ", ".join(packages)
    if frozen:
        return (
            f"{names} not in this build (the binary carries onnxruntime only; install sark-node with pip "
            f"and the {extra} extra for {units})"
        )
    return f"{names} not installed (install sark-node[{extra}])"


__all__ = ["FROZEN", "not_installed"]
