"""What every block of the campaign file's schema shares: `Block`, and fields bound as their values are.

A block of the file (`scheduler.language.schema`, `scheduler.language.genschema`) is a pydantic model
that refuses any key its parser refuses. A field that becomes a field of a value (`TaskSpec.runs` is
`num_inference_runs`) takes that field's bounds and default with `like`, so the schema's bounds are the
ones the parser enforces, written once.
"""

from __future__ import annotations

from typing import Any, Final

import annotated_types
from pydantic import BaseModel, ConfigDict, Field

URL_PATTERN: Final = r"^https?://"
_BOUNDS: Final[tuple[tuple[type, str], ...]] = (
    (annotated_types.Ge, "ge"),
    (annotated_types.Gt, "gt"),
    (annotated_types.Le, "le"),
    (annotated_types.Lt, "lt"),
    (annotated_types.MinLen, "min_length"),
    (annotated_types.MaxLen, "max_length"),
)
_UNSET: Final = object()


def like(model: type[BaseModel], name: str, description: str, default: object = _UNSET) -> Any:
    """A field with the bounds and the default of `model`'s field `name` (the value the file's field
    becomes), so that the schema's bounds are those the parser enforces; `default` replaces the
    model's where the file's default differs."""
    info = model.model_fields[name]
    bounds = {
        keyword: getattr(item, keyword)
        for item in info.metadata
        for kind, keyword in _BOUNDS
        if isinstance(item, kind)
    }
    value = info.get_default(call_default_factory=True) if default is _UNSET else default
    return Field(default=value, description=description, **bounds)


def one_of(*names: str) -> dict[str, Any]:
    """A mapping's JSON Schema extra: exactly one of these fields is given."""
    return {"oneOf": [{"required": [name]} for name in names]}


class Block(BaseModel):
    """A mapping of the campaign file: its own fields only (the parser refuses any other key)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


__all__ = ["URL_PATTERN", "Block", "like", "one_of"]
