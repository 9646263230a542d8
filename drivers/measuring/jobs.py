"""What a measuring child is given.

The parent (`drivers.measuring.harness`, in the worker's long-running process) builds a `ChildJob` and reads
back one process's `protocol.Measurement` (the value the store keeps, its raw parts only); both are
plain values pickled over the pipe. The job lives here, beside no runtime: the parent imports this
module only, and names the child's side (`drivers.measuring.child` or `drivers.measuring.genchild`, with
numpy and the runtimes) for `drivers.measuring.spawning` to start.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol import ModelFormat, TaskSpec


@dataclass(frozen=True)
class ChildJob:
    """What one child measures.

    Attributes:
        name: the model's name for people (the campaign's name for it, not a cache file's digest).
    """

    model_path: str
    fmt: ModelFormat
    spec: TaskSpec
    allow_code_models: bool = False
    cache_dir: str | None = None
    name: str = ""


__all__ = ["ChildJob"]
