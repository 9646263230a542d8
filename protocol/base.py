"""The base of every wire value, and the summary statistics every measurement uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class Value(BaseModel):
    """Base of every wire value: frozen, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


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
