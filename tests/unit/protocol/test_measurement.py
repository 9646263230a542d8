"""`Measurement.nothing_timed`: the one empty measurement that measuring children and endpoint tasks fill."""

from __future__ import annotations

from protocol import ComputeUnit, Measurement
from protocol.stats import NO_SAMPLES


def test_nothing_timed_keeps_the_unit_and_leaves_every_figure_empty() -> None:
    m = Measurement.nothing_timed(ComputeUnit.CPU_ONNX)
    assert m.compute_unit is ComputeUnit.CPU_ONNX
    assert (m.load_ms, m.inference_ms) == (NO_SAMPLES, NO_SAMPLES)
    assert NO_SAMPLES.n == 0
    assert (m.load_first_ms, m.first_inference_ms, m.warmups_used) == (0.0, 0.0, 0)
    assert (m.peak_load_ram_mb, m.peak_inference_ram_mb, m.cpu_cores_used) == (0.0, 0.0, 0.0)
    assert (m.samples_ms, m.load_samples_ms, m.generation, m.capacity) == ((), (), None, None)


def test_nothing_timed_is_a_valid_wire_value() -> None:
    m = Measurement.nothing_timed(ComputeUnit.CPU_TORCH)
    assert Measurement.model_validate(m.model_dump()) == m
