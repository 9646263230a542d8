"""The base of every wire value, and the summary statistics every measurement uses."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class Value(BaseModel):
    """Base of every wire value: frozen, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def with_(self, **changes: object) -> Self:
        """A copy with some fields changed; a name that is no field of the model is a `TypeError`.

        `model_copy(update=...)` would keep a misspelt name silently. Values are not re-validated
        (the scheduler copies its task views on every event); mypy checks the callers' types.
        """
        unknown = changes.keys() - type(self).model_fields.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(sorted(unknown))}")
        return self.model_copy(update=changes)


def field_problems(exc: ValidationError, root: str = "") -> list[str]:
    """A pydantic error as one line per bad field, `path.to.field: message` (`root` for the model itself)."""
    errors = exc.errors(include_url=False)
    return [f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}" for e in errors]


class Stats(Value):
    """Summary statistics of a sample, in the sample's unit (milliseconds for times)."""

    n: int = Field(ge=0)
    min: float
    max: float
    mean: float
    median: float
    stddev: float
    p90: float
    p95: float
    p99: float
    cv: float
    mad: float = 0.0
    iqr: float = 0.0
    outliers: int = 0
