"""Informational lines a runtime's C++ writes to fd 2, held off the terminal while it prints them.

LiteRT announces its XNNPACK delegate on every interpreter and ExecuTorch logs its CPU detection and
thread-pool size; no setting silences either. In a spawned child, fd 2 is the user's terminal (on the
embedded swarm, `submit`'s one-line error). `dropping` holds fd 2 in a temporary file around the
call that prints, then writes back every line but those it was told to drop: an error the runtime
prints still reaches stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def dropping(dropped: Callable[[bytes], bool]) -> Iterator[None]:
    """Hold fd 2 while the body runs; write back each line for which `dropped` (on the line without
    its line end) is false."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True) if not dropped(line.rstrip())]
            if kept:
                os.write(2, b"".join(kept))


__all__ = ["dropping"]
