"""The worker's outbox: signed results kept on disk until the submitter acknowledges them."""

from __future__ import annotations

import os
from pathlib import Path

from node.errors import disk_errors
from protocol import Result
from protocol.codec import decode, encode


class Outbox:
    """One file per undelivered result, written atomically before it is sent."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root

    def _path(self, task_id: str, lease_id: str) -> Path:
        return self._root / f"{task_id}.{lease_id}.result"

    def put(self, result: Result) -> None:
        """Keep a result until `ack`; survives a crash of the worker.

        Raises:
            DiskFull: the outbox's disk is full; nothing is left half-written.
        """
        path = self._path(result.task_id, result.lease_id)
        tmp = path.with_suffix(".tmp")
        try:
            with disk_errors(self._root, f"keeping the result of {result.task_id}"), open(tmp, "wb") as f:
                f.write(encode(result))
                f.flush()
                os.fsync(f.fileno())
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, task_id: str, lease_id: str) -> Result | None:
        """The stored result of a lease, or None."""
        try:
            data = self._path(task_id, lease_id).read_bytes()
        except FileNotFoundError:
            return None
        message = decode(data)
        return message if isinstance(message, Result) else None

    def ack(self, task_id: str, lease_id: str) -> None:
        """The submitter has the result: forget it."""
        self._path(task_id, lease_id).unlink(missing_ok=True)

    def pending(self) -> list[tuple[str, str]]:
        """(task id, lease id) of every result not yet acknowledged."""
        out = []
        for p in sorted(self._root.glob("*.result")):
            task_id, _, lease_id = p.stem.rpartition(".")
            out.append((task_id, lease_id))
        return out
