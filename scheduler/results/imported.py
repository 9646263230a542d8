"""Other tools' results as board rows, marked unverified: the values and the bounded JSON reading.

A tool's file (GuideLLM's benchmarks.json, AIPerf's profile_export_aiperf.json, vLLM bench serve's
result, llama-bench's `-o json`) is untrusted bytes: read at most `MAX_TOOL_BYTES` (nesting bounded by
the JSON scanner's own recursion limit), with at most `MAX_ROWS` rows; a file that does not parse, or
lacks what its tool always writes, is an `Unreadable` value naming the file, the stage and the cause,
never an exception out of here. An `ImportedRow`
names what its tool measured in the tool's own words (`Figure.name`: `time_to_first_token_ms median`),
with the tool's unit; nothing is converted or derived, and no row is ever verified: the tool's word is
all there is (`scheduler.results.toolformats` reads each tool's layout).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Final

MAX_TOOL_BYTES: Final = 64 << 20
"""The largest tool file read (GuideLLM keeps every request: about 20 KB per request)."""
MAX_ROWS: Final = 10_000
"""The most rows one file may give."""
MAX_TEXT: Final = 256
"""The longest name, model or setting kept from a tool file (longer ones are cut, marked with ...)."""


@dataclass(frozen=True, order=True)
class Figure:
    """One figure as the tool measured it: its name in the tool's words, the value, the tool's unit."""

    name: str
    value: float
    unit: str


@dataclass(frozen=True, order=True)
class ImportedRow:
    """One row of another tool's results; never verified.

    Attributes:
        tool: the tool ("guidellm", "aiperf", "llama-bench").
        version: the tool's version, as its file says ("" when it says none).
        model: the model, as the tool names it.
        target: where it ran: the server's URL, or the machine and backend.
        setting: the load or test, in the tool's words ("concurrent streams=2", "pp64 threads=2").
        figures: what the tool measured.
        requests: the successful requests counted ("" where the tool does not count requests).
        source: the file's name.
    """

    tool: str
    version: str
    model: str
    target: str
    setting: str
    figures: tuple[Figure, ...]
    requests: str
    source: str

    @property
    def named(self) -> str:
        """The tool and its version as the file gives it ("vllm" where it gives none)."""
        return f"{self.tool} {self.version}" if self.version else self.tool


@dataclass(frozen=True)
class Unreadable:
    """A tool file that gave no rows: the file, the stage and the cause."""

    file: str
    stage: str
    cause: str

    def __str__(self) -> str:
        return f"{self.file}: {self.stage}: {self.cause}"


class Malformed(Exception):
    """Raised inside a tool's reader where the file lacks what the tool writes (the cause)."""


def parse_json(data: bytes) -> object:
    """The JSON value of a tool file; `Malformed` when it is too big, too deep, or no JSON at all."""
    if len(data) > MAX_TOOL_BYTES:
        raise Malformed(f"over {MAX_TOOL_BYTES >> 20} MiB")
    try:
        return json.loads(data)
    except RecursionError as exc:  # the C scanner's own bound on nesting
        raise Malformed("nested too deep") from exc
    except ValueError as exc:
        raise Malformed(f"not JSON: {exc}") from exc


def field(value: object, *path: str | int) -> object:
    """`value[path[0]][path[1]]...`; `Malformed` naming the path where one step is missing."""
    for depth, key in enumerate(path):
        if isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value):
            value = value[key]
            continue
        if isinstance(key, str) and isinstance(value, dict) and key in value:
            value = value[key]
            continue
        raise Malformed(f"no {'.'.join(str(k) for k in path[: depth + 1])}")
    return value


def number(value: object, *path: str | int) -> float:
    """A finite number at `path` (bool is not one); `Malformed` otherwise."""
    found = field(value, *path)
    if isinstance(found, bool) or not isinstance(found, int | float) or not math.isfinite(found):
        raise Malformed(f"{'.'.join(str(k) for k in path)} is not a finite number: {short(repr(found))}")
    return float(found)


def text(value: object, *path: str | int, default: str | None = None) -> str:
    """A string (or number) at `path`, cut to `MAX_TEXT`; `default` when missing, if given."""
    try:
        found = field(value, *path)
    except Malformed:
        if default is None:
            raise
        return default
    if isinstance(found, bool) or not isinstance(found, str | int | float):
        if default is None:
            raise Malformed(f"{'.'.join(str(k) for k in path)} is not a text")
        return default
    return short(str(found))


def items(value: object, *path: str | int) -> list[object]:
    """The list at `path` (at most `MAX_ROWS`); `Malformed` when it is none or longer."""
    found = field(value, *path) if path else value
    if not isinstance(found, list):
        raise Malformed(f"{'.'.join(str(k) for k in path) or 'the file'} is not a list")
    if len(found) > MAX_ROWS:
        raise Malformed(f"over {MAX_ROWS} rows")
    return found


def short(value: str) -> str:
    """`value` cut to `MAX_TEXT` characters, its control characters dropped."""
    kept = "".join(c for c in value if c.isprintable())
    return kept if len(kept) <= MAX_TEXT else kept[: MAX_TEXT - 3] + "..."
