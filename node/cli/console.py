"""The rich console every command prints through, and how a peer id is shortened for people.

On a terminal, rich lays tables out at the terminal's width. Anywhere else (a pipe, a file) a line
is never broken with a real newline: a path or a footnote stays whole for scripts and copy-paste,
and a table takes its natural width (rich's default of 80 columns would fold cells and wrap
captions). An exported `COLUMNS` still sets the width tables are laid out at.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rich.console import Console

UNBOUNDED: Final = 100_000
"""The console width when output is not a terminal and `COLUMNS` is not exported: no line is wrapped."""
ID_TAIL: Final = 6
"""How many characters end a shortened peer id: every libp2p id starts alike (`12D3KooW`), the end differs."""


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that hard-wraps nothing when it is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    width = None if os.environ.get("COLUMNS", "").isdigit() else UNBOUNDED
    return Console(stderr=stderr, width=width, soft_wrap=True)


def id_tail(peer_id: str) -> str:
    """A peer id as people read it in a narrow table: its end, after an ellipsis (`…Xy7Qp2`)."""
    return "…" + peer_id[-ID_TAIL:]
