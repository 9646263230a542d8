"""How a 429 or 5xx answer is retried: the policy's bounds and the server's `Retry-After`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

RETRIED: Final = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S: Final = 86_400.0  # a longer Retry-After is not a schedule: treated as absent


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
    """`Retry-After` as seconds: delay-seconds (digits only) or an HTTP date (one in the past: 0).

    None, the same as absent, for anything else: garbage, a negative or fractional number, a
    non-finite one, or a wait past `MAX_RETRY_AFTER_S` (a server that says "in a year" is not
    scheduling a retry). The caller bounds a valid wait by its own budget and deadline.
    """
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        seconds = float(int(text[:12]))  # 12 digits are past any bound already
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds <= MAX_RETRY_AFTER_S else None


__all__ = ["MAX_RETRY_AFTER_S", "RETRIED", "RetryPolicy", "retry_after_s"]
