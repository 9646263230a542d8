"""How a 429 or 5xx answer is retried: the policy's bounds and the server's `Retry-After`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

RETRIED: Final = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How long a request may wait on a 429 or 5xx before it is reported instead.

    Attributes:
        max_retries: retries after the first attempt.
        max_wait_s: total time one request may spend waiting between attempts.
        backoff_s: the first wait when the server gives no `Retry-After`; it doubles.
    """

    max_retries: int = 3
    max_wait_s: float = 30.0
    backoff_s: float = 0.5


def retry_after_s(value: str | None) -> float | None:
    """`Retry-After` as seconds: a number, or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


__all__ = ["RETRIED", "RetryPolicy", "retry_after_s"]
