"""A model server load's measurement as a worker reports it, for the pure checks' tests: the records'
summary (`protocol.genstats.summarize_generation`) in a measurement whose tensor-side figures are
empty (a load has no model of its own to load or run)."""

from __future__ import annotations

from protocol import ComputeUnit, GenerationStats, Measurement, RunConditions
from protocol.stats import NO_SAMPLES


def load_measurement(stats: GenerationStats) -> Measurement:
    """A measurement of one load: `stats` as its generation, nothing measured of a model."""
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=0,
        inference_ms=NO_SAMPLES,
        peak_load_ram_mb=50.0,
        peak_inference_ram_mb=60.0,
        cpu_cores_used=1.0,
        conditions=RunConditions(background_cores=0.05),
        generation=stats,
    )
