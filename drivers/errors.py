"""Errors of the drivers package: a task that could not be measured, and why."""

from __future__ import annotations

from protocol import FailureReason


class DriverError(Exception):
    """Base of every error raised by `drivers`.

    Attributes:
        detail: what went wrong, for people and logs; never branched on.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class TaskFailed(DriverError):
    """A benchmark task ended without a measurement.

    Attributes:
        reason: the protocol's closed failure reason, the field callers branch on.
        detail: a one-line explanation for people.
    """

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.detail} ({self.reason.value})"
