"""Collecting a campaign file's problems in one pass, each at the field path the user wrote."""

from __future__ import annotations

import difflib
import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from scheduler.errors import FieldProblem


class Problems:
    """An ordered, duplicate-free list of `FieldProblem`s (a swept job repeats its own mistakes)."""

    def __init__(self) -> None:
        self._items: dict[FieldProblem, None] = {}

    @property
    def items(self) -> tuple[FieldProblem, ...]:
        """The problems so far, in the order found."""
        return tuple(self._items)

    def add(self, path: str, problem: str) -> None:
        """Record one problem at a field path."""
        self._items.setdefault(FieldProblem(path, problem), None)


def join(path: str, field: str) -> str:
    """The path of a named field under `path` ("" is the top)."""
    return f"{path}.{field}" if path else field


def dig(loc: Sequence[int | str]) -> str:
    """The path suffix of a pydantic error location below a field: ``.a[0].b``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple, _SHORT.maxset = 2, 4, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 60, 60, 40


def describe(value: object) -> str:
    """A short, type-revealing rendering of a user's value for an error message.

    Bounded before it is built: a huge or deeply shared value (a YAML alias bomb) shows its first
    few items and levels only, so the message costs the same whatever the value's size.
    """
    if value is None:
        return "nothing"
    text = _SHORT.repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if not isinstance(value, str) else text


def number(value: object) -> float | None:
    """A campaign's number as the spec will read it (pydantic takes "1e300" for a float; YAML reads
    an exponent without a dot as text), or None when it is no finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        found = float(value)
    except ValueError:
        return None
    return found if math.isfinite(found) else None


def check_keys(keys: Iterable[object], path: str, known: Iterable[str], problems: Problems) -> None:
    """Flag every key not in `known`, suggesting the closest known one."""
    names = list(known)
    for key in keys:
        if isinstance(key, str) and key in names:
            continue
        close = difflib.get_close_matches(str(key), names, n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; known: {', '.join(names)}"
        problems.add(join(path, str(key)), f"unknown field{hint}")


class CampaignFiles(dict[str, bytes]):
    """The bytes of the files a campaign names (`campaign_files`), by name, and why node/ left out each
    one it did not read (too large, not there): the problem at the field then says so."""

    def __init__(self, found: Mapping[str, bytes] | None = None, refused: Mapping[str, str] | None = None):
        super().__init__(found or {})
        self.refused: dict[str, str] = dict(refused or {})


def unread(files: Mapping[str, bytes], name: str, fallback: str) -> str:
    """The problem for a named file that is not in `files`: why node/ refused it, or `fallback`."""
    reason = files.refused.get(name) if isinstance(files, CampaignFiles) else None
    return f"{name}: {reason}" if reason else fallback
