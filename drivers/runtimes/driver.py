"""The driver interface: what every runtime driver offers the harness.

A driver probes its unit truthfully (a tiny model really ran with CPU fallback disabled), loads a
model into a runtime session, and hands the harness a zero-argument `run` callable over prepared
feeds. Runtimes are imported inside driver methods, never at module import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from drivers.files.inputs import InputSig
from protocol import AsyncRun, ComputeUnit, InputData, ModelFormat, UnitStatus

Feeds = Mapping[str, npt.NDArray[np.generic]]


@dataclass(frozen=True)
class LoadOptions:
    """How a driver should open a model.

    Attributes:
        threads: intra-op threads (None: the runtime's default).
        allow_code_models: the owner opted in to formats that run code when loaded.
        cache_dir: where a runtime may keep compiled engines, or None.
        fmt: the model's format (None: from the file name).
        precision: the precision asked of a runtime that offers the choice (None: its default).
        dynamic_shapes: keep dynamic input dimensions when compiling (else: the shapes fed).
        performance_hint: what a runtime that takes a hint compiles for ("latency", "throughput").
        input_shapes: the job's shapes for inputs with dynamic dimensions (what will be fed).
        input_data: the job's input arrays (their shapes are what will be fed).
    """

    threads: int | None = None
    allow_code_models: bool = False
    cache_dir: str | None = None
    fmt: ModelFormat | None = None
    precision: str | None = None
    dynamic_shapes: bool = False
    performance_hint: str = "latency"
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    input_data: tuple[InputData, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where a loaded model really runs.

    Attributes:
        providers: the runtime's providers or devices that really hold the model, first = primary.
        node_share: share of graph nodes per provider (0..1), empty when the runtime cannot say.
        fallback: the runtime put the model somewhere other than the requested unit (its primary
            provider or device is not the one asked for), whatever the shares say.
        asked: the provider or device (a key of `node_share`) that the unit asked for; "" when the
            runtime cannot say where nodes ran.
    """

    providers: tuple[str, ...]
    node_share: dict[str, float] = field(default_factory=dict)
    fallback: bool = False
    asked: str = ""

    def on_asked(self) -> float | None:
        """The share of nodes on the asked provider or device, or None when the runtime cannot say."""
        if not self.asked or not self.node_share:
            return None
        return self.node_share.get(self.asked, 0.0)

    def fell_back(self, least_share: float) -> bool:
        """Whether the run is a fallback: not on the asked unit, or under `least_share` of its nodes."""
        share = self.on_asked()
        return self.fallback or (share is not None and share < least_share)


@dataclass(frozen=True)
class Settings:
    """Runtime settings recorded with a measurement."""

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    spinning: bool | None = None
    runtime: dict[str, str] = field(default_factory=dict)  # the runtime's own settings, by its names


class Loaded(Protocol):
    """A model opened by a driver, ready to run."""

    def inputs(self) -> list[InputSig]:
        """The model's inputs."""
        ...

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """A zero-argument callable that runs one inference on `feeds` (and synchronises a device)."""
        ...

    def placement(self) -> Placement:
        """Where the model really runs."""
        ...

    def settings(self) -> Settings:
        """The thread settings in effect."""
        ...


@runtime_checkable
class AsyncRunner(Protocol):
    """A loaded model whose runtime runs several infer requests at once (OpenVINO): its throughput run,
    apart from the timed runs, with the requests its compiled model asks for."""

    def throughput(self, feeds: Feeds, inferences: int) -> AsyncRun:
        """At least `inferences` inferences on `feeds` through the runtime's own requests in flight,
        timed from the first start to the last completion."""
        ...


class Driver(Protocol):
    """One compute unit on one runtime."""

    unit: ComputeUnit
    formats: frozenset[ModelFormat]

    def probe(self) -> UnitStatus:
        """Whether a tiny model really ran on this unit, with CPU fallback disabled; why not otherwise."""
        ...

    def prepare(self) -> None:
        """Import the runtime, so import time stays out of load time."""
        ...

    def load(self, path: Path, options: LoadOptions) -> Loaded:
        """Open a model on this unit; raises TaskFailed on refusal or failure."""
        ...

    def versions(self) -> dict[str, str]:
        """Runtime name -> version."""
        ...


@runtime_checkable
class Converter(Protocol):
    """A driver that converts some formats to its own in the child, before the timed loads (a
    `torch.export` program lowered to an ExecuTorch .pte); the conversion is recorded with the result."""

    converts: frozenset[ModelFormat]

    def convert(self, path: Path, out: Path, options: LoadOptions) -> tuple[Path, str]:
        """The converted model, written under the folder `out`, and the conversion in words (tool,
        version, steps); raises TaskFailed on refusal or failure."""
        ...
