"""Device profile, runtime drivers and the measurement harness.

Rooms, each built only on those before it (tests/unit/repository/test_imports.py pins the order):
    errors     DriverError, TaskFailed, ProbeFailed (a module: every room raises them)
    files      model file checks before any runtime opens them, inputs, the models tests build
    runtimes   one driver per runtime in an explicit registry (ONNX Runtime, OpenVINO, LiteRT,
               ExecuTorch, PyTorch, Core ML, llama.cpp) and the two generation runtimes
    measuring  the measuring child and its parent: spawning, the frame, meters, energy, telemetry,
               the device's facts, calibration, the challenge's kernels
    endpoint   the HTTP load client of model servers and an endpoint task as a Measurement
    probe      the device profile, its probe in a spawned child, and the probe's cache per machine

The package's names load lazily, on first use: `import drivers` costs nothing, and a process that
only spawns children (a joined worker) never loads numpy, onnxruntime, torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from drivers.endpoint.floorprobe import ServerTiming, probe_floor
    from drivers.endpoint.metricsread import MetricsPage, read_metrics
    from drivers.endpoint.options import EndpointOptions
    from drivers.endpoint.servers import probe_server
    from drivers.endpoint.task import measure_endpoint
    from drivers.errors import DriverError, ProbeFailed, TaskFailed
    from drivers.files.formats import check_model_file, detect_format
    from drivers.measuring.harness import measure
    from drivers.measuring.offers import unit_offers
    from drivers.measuring.peaks import measure_peak
    from drivers.probe.apart import detect_profile_apart, probe_servers_apart
    from drivers.probe.profile import detect_profile, probe_generation

_HOMES: Final = {
    "DriverError": "errors",
    "EndpointOptions": "endpoint.options",
    "MetricsPage": "endpoint.metricsread",
    "ProbeFailed": "errors",
    "ServerTiming": "endpoint.floorprobe",
    "TaskFailed": "errors",
    "check_model_file": "files.formats",
    "detect_format": "files.formats",
    "detect_profile": "probe.profile",
    "detect_profile_apart": "probe.apart",
    "measure": "measuring.harness",
    "measure_endpoint": "endpoint.task",
    "measure_peak": "measuring.peaks",
    "probe_floor": "endpoint.floorprobe",
    "probe_generation": "probe.profile",
    "probe_server": "endpoint.servers",
    "probe_servers_apart": "probe.apart",
    "read_metrics": "endpoint.metricsread",
    "unit_offers": "measuring.offers",
}


def __getattr__(name: str) -> object:
    """Import a public name's module the first time the name is used."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'drivers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"drivers.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DriverError",
    "EndpointOptions",
    "MetricsPage",
    "ProbeFailed",
    "ServerTiming",
    "TaskFailed",
    "check_model_file",
    "detect_format",
    "detect_profile",
    "detect_profile_apart",
    "measure",
    "measure_endpoint",
    "measure_peak",
    "probe_floor",
    "probe_generation",
    "probe_server",
    "probe_servers_apart",
    "read_metrics",
    "unit_offers",
]
