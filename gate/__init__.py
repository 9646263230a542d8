"""gate package (see module docstring list once filled in)."""

from __future__ import annotations

__all__: list[str] = []
