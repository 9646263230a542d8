"""Collecting a campaign file's problems in one pass, each at the field path the user wrote."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

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


def describe(value: object) -> str:
    """A short, type-revealing rendering of a user's value for an error message."""
    if value is None:
        return "nothing"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if not isinstance(value, str) else text


def check_keys(keys: Iterable[object], path: str, known: Iterable[str], problems: Problems) -> None:
    """Flag every key not in `known`, suggesting the closest known one."""
    names = list(known)
    for key in keys:
        if isinstance(key, str) and key in names:
            continue
        close = difflib.get_close_matches(str(key), names, n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; known: {', '.join(names)}"
        problems.add(join(path, str(key)), f"unknown field{hint}")
