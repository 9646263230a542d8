"""Event lines: what a node did, as structured records (`--events` prints them as JSON lines).

The test lab and the chaos report read them; people read the logs. Emitting is synchronous and
cheap; the default sink drops everything.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Protocol


class EventSink(Protocol):
    """Where a node's events go."""

    def __call__(self, event: str, /, **fields: Any) -> None: ...


def quiet(event: str, /, **fields: Any) -> None:
    """Drop the event."""


def json_lines(event: str, /, **fields: Any) -> None:
    """Print the event as one JSON line on stdout, with a wall-clock time stamp."""
    sys.stdout.write(json.dumps({"event": event, "t": time.time(), **fields}, default=str) + "\n")
    sys.stdout.flush()
