"""Errors of the drivers package: a task that could not be measured, and why."""

from __future__ import annotations

from protocol import FailureReason, Stage


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
        detail: a one-line explanation for people; once located, it starts with the model's name and
            the stage ("resnet.onnx: inspect failed: ...").
        stage: the step that failed (inspect, load, run), None until the harness or child locates it.
    """

    def __init__(self, reason: FailureReason, detail: str, stage: Stage | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.stage = stage

    def located(self, name: str, stage: Stage) -> TaskFailed:
        """This failure named for the model and placed at `stage`; one that is located already stays."""
        if self.stage is not None:
            return self
        return TaskFailed(self.reason, f"{name}: {stage.value} failed: {self.detail}", stage)

    def __str__(self) -> str:
        return f"{self.detail} ({self.reason.value})"


class ProbeFailed(DriverError):
    """The spawned child that probes this device (or its declared servers) ended without a result.

    Attributes:
        stage: the step the child had reached (start, device, calibration, units, servers, result).
        why: what went wrong there, without the stage (`detail` is the whole sentence).
    """

    def __init__(self, stage: str, why: str) -> None:
        super().__init__(f"device probe failed at {stage}: {why}")
        self.stage = stage
        self.why = why
