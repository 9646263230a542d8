"""Output fingerprints: equal under a class's float noise, different for other outputs."""

from __future__ import annotations

import numpy as np
import pytest

from drivers.measuring.outputs import output_fingerprint


def test_noise_within_a_class_keeps_the_fingerprint_and_other_outputs_change_it() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(1, 10)).astype(np.float32)
    shifted = logits * np.float32(1 + 2e-7)  # a reduction's order, fp32
    assert output_fingerprint([logits]) == output_fingerprint([shifted])
    assert output_fingerprint([logits]) != output_fingerprint([np.zeros_like(logits)])
    assert output_fingerprint([logits]) != output_fingerprint([logits * 1.01])
    assert output_fingerprint([logits]) != output_fingerprint([logits.reshape(10, 1)])
    assert output_fingerprint({"b": logits, "a": logits}) == output_fingerprint([logits, logits])
    assert output_fingerprint(None) == ""


def test_the_output_sample_takes_evenly_spaced_values_and_stays_finite() -> None:
    from drivers.measuring.outputs import output_sample

    outputs = [
        np.arange(1000, dtype=np.float32).reshape(10, 100),
        np.array([np.nan, np.inf], dtype=np.float32),
    ]
    sample = output_sample(outputs, size=4)
    assert sample[0] == 0.0
    assert sample[-1] == pytest.approx(3.4028234663852886e38)
    assert len(sample) == 4
    assert output_sample([np.zeros(3, dtype=np.float32)]) == (0.0, 0.0, 0.0)
    assert output_sample("not arrays") == ()
