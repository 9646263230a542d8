"""What a measuring child is given and what it returns.

The parent (`drivers.harness`, in the worker's long-running process) builds a `ChildJob` and reads
back a `ProcessResult`; both are plain values pickled over the pipe, so they live here, beside no
runtime: the parent imports this module only, and names the child's side (`drivers.child` or
`drivers.genchild`, with numpy and the runtimes) for `drivers.spawning` to start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol import EnergyReading, InputFed, ModelFormat, RequestRecord, TaskSpec
from protocol.telemetry import Telemetry


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


@dataclass(frozen=True)
class ProcessResult:
    """What one child measured, in plain numbers (milliseconds, MiB)."""

    load_ms: list[float]
    first_inference_ms: float
    warmups_used: int
    samples_ms: list[float]
    peak_load_ram_mb: float
    peak_inference_ram_mb: float
    cpu_time_s: float
    cores_used: float
    background_cores: float
    gpu_util_pct: float | None
    gpu_mem_mb: float | None
    providers: tuple[str, ...]
    node_share: dict[str, float]
    fallback: bool
    intra_op_threads: int | None
    inter_op_threads: int | None
    spinning: bool | None
    versions: dict[str, str] = field(default_factory=dict)
    thermal: str = ""
    power: str = ""
    inputs: tuple[InputFed, ...] = ()
    records: tuple[RequestRecord, ...] = ()  # generate tasks: every timed request
    wall_s: float = 0.0  # generate tasks: wall time of the timed requests
    energy: EnergyReading | None = None  # the measured phase's energy (drivers.energy)
    telemetry: Telemetry | None = None  # the device over the timed phase (`drivers.telemetry`)
    mark_runs: list[int] = field(default_factory=list)  # marks on that phase (`drivers.sustain`)
    mark_ms: list[float] = field(default_factory=list)
    fingerprint: str = ""  # the first inference's outputs (`drivers.outputs`); "" for generate tasks


__all__ = ["ChildJob", "ProcessResult"]
