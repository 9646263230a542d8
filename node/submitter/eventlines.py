"""The event line each attempt's scheduler event makes (`--events`): its name and fields."""

from __future__ import annotations

from typing import Any

import scheduler as sch


def event_line(event: sch.Event) -> tuple[str, dict[str, Any]] | None:
    """The event line an attempt's event makes (name and fields); lapses and rejections are recorded."""
    match event:
        case sch.OfferCommitted():
            return "committed", {"lease": event.lease_id, "queue_position": event.queue_position}
        case sch.OfferDeclined():
            return "declined", {"reason": event.reason.value, "detail": event.detail}
        case sch.OfferLost():
            return "lost", {"detail": event.detail}
        case sch.ProgressReported():
            fields = {"lease": event.lease_id, "phase": event.phase.value, "done": event.done}
            return "heartbeat", {**fields, "total": event.total}
        case sch.TaskFailedRemotely():
            return "failed", {"lease": event.lease_id, "reason": event.reason.value, "detail": event.detail}
    return None
