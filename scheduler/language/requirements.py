"""A job's `require:` block: what it demands of a device beyond its compute unit."""

from __future__ import annotations

from typing import Final

from protocol import Value
from scheduler.language.problems import Problems, check_keys, describe

_REQUIRE_FIELDS: Final = ("min_ram_gb", "min_vram_gb", "os", "peers")


class Requirements(Value):
    """What a job demands of a device beyond its compute unit.

    Attributes:
        min_ram_gb: installed RAM at least this (GB); the model size may raise it (see `needs_of`).
        min_vram_gb: GPU memory at least this (GB), for GPU units.
        os: the device OS must be one of these (case-insensitive); empty means any.
        peers: only these peer ids; empty means any.
    """

    min_ram_gb: float = 0.0
    min_vram_gb: float = 0.0
    os: tuple[str, ...] = ()
    peers: tuple[str, ...] = ()


def parse_requirements(raw: object, path: str, problems: Problems) -> Requirements | None:
    """A job's `require:` block, or None with every problem recorded."""
    if not isinstance(raw, dict):
        problems.add(path, f"expected a mapping ({', '.join(_REQUIRE_FIELDS)}), got {describe(raw)}")
        return None
    before = len(problems.items)
    check_keys(raw, path, _REQUIRE_FIELDS, problems)
    values: dict[str, object] = {}
    for field in ("min_ram_gb", "min_vram_gb"):
        value = raw.get(field, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1e6:
            problems.add(f"{path}.{field}", f"expected a non-negative number of GB, got {describe(value)}")
        else:
            values[field] = float(value)
    for field in ("os", "peers"):
        value = raw.get(field, [])
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items):
            problems.add(f"{path}.{field}", f"expected a name or a list of names, got {describe(value)}")
        else:
            values[field] = tuple(items)
    return Requirements.model_validate(values) if len(problems.items) == before else None
