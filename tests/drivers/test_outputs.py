"""Output fingerprints: equal under a class's float noise, different for other outputs."""

from __future__ import annotations

import numpy as np

from drivers.outputs import output_fingerprint


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
