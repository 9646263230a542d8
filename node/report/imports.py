"""Other tools' result files read from disk with limits, and kept on a board (`sark-node import`).

`read_tool(tool, path)` reads at most `MAX_TOOL_BYTES` of the file and hands the bytes to the tool's
reader (`scheduler.results.toolformats`); anything wrong is an `Unreadable` naming the file, the stage
and the cause. `keep_import` copies the tool's file, byte for byte, under the board's
`imported/<tool>-<sha256 prefix>/` with `tool.txt` naming its tool; `kept_imports` reads every kept
file again when the board is drawn, so a row on the board is always the tool's own file read now,
never a summary we wrote. The same file kept twice is one folder (its digest names it).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Final

from scheduler.results.imported import MAX_TOOL_BYTES, ImportedRow, Unreadable
from scheduler.results.toolformats import TOOLS, read_tool_file

IMPORTED: Final = "imported"
"""The folder under the board's that keeps the tools' files."""
TOOL_FILE: Final = "tool.txt"
SAFE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

Kept = tuple[str, str, tuple[ImportedRow, ...]]
"""A kept import: its folder's name, the tool file's name, its rows."""


def read_bytes(path: Path) -> bytes | Unreadable:
    """A tool file's bytes, at most `MAX_TOOL_BYTES`."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TOOL_BYTES + 1)
    except OSError as exc:
        return Unreadable(path.name, "reading the file", exc.strerror or str(exc))
    if len(data) > MAX_TOOL_BYTES:
        return Unreadable(path.name, "reading the file", f"over {MAX_TOOL_BYTES >> 20} MiB")
    return data


def read_tool(tool: str, path: Path) -> tuple[ImportedRow, ...] | Unreadable:
    """The rows of `tool`'s file at `path`, or why it gives none."""
    found = _read(tool, path)
    return found if isinstance(found, Unreadable) else found[1]


def _read(tool: str, path: Path) -> tuple[bytes, tuple[ImportedRow, ...]] | Unreadable:
    """The file's bytes, read once, and their rows."""
    if tool not in TOOLS:
        return Unreadable(path.name, "choosing the reader", f"no tool {tool!r}; one of {', '.join(TOOLS)}")
    data = read_bytes(path)
    if isinstance(data, Unreadable):
        return data
    rows = read_tool_file(tool, data, _kept_name(path.name))
    return rows if isinstance(rows, Unreadable) else (data, rows)


def keep_import(tool: str, path: Path, board: Path) -> str | Unreadable:
    """Copy `tool`'s file at `path` under `board/imported/` once it reads (the bytes that were read,
    not the file a second time); the folder's name."""
    found = _read(tool, path)
    if isinstance(found, Unreadable):
        return found
    data = found[0]
    folder = f"{tool}-{hashlib.sha256(data).hexdigest()[:16]}"
    target = board / IMPORTED / folder
    part = board / IMPORTED / f".{folder}.part"
    if not target.is_dir():
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        (part / _kept_name(path.name)).write_bytes(data)
        (part / TOOL_FILE).write_text(tool + "\n")
        part.rename(target)  # whole or not at all
    return folder


def kept_imports(board: Path) -> list[Kept] | Unreadable:
    """Every import kept on `board`, each read again from its tool's file, in folder order."""
    root = board / IMPORTED
    found: list[Kept] = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name.startswith("."):
            continue
        said = read_bytes(folder / TOOL_FILE)
        tool = "" if isinstance(said, Unreadable) else said[:64].decode("ascii", "replace").strip()
        files = [p for p in sorted(folder.iterdir()) if p.name != TOOL_FILE]
        if len(files) != 1:
            return Unreadable(f"{IMPORTED}/{folder.name}", "reading the kept import", "not one tool file")
        rows = read_tool(tool, files[0])
        if isinstance(rows, Unreadable):
            return Unreadable(f"{IMPORTED}/{folder.name}/{rows.file}", rows.stage, rows.cause)
        found.append((folder.name, files[0].name, rows))
    return found


def _kept_name(name: str) -> str:
    """The file's name as kept: its own when it is a plain file name, else `tool-file.json`."""
    return name if name and name[0] != "." and set(name) <= SAFE and name != TOOL_FILE else "tool-file.json"
