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


def test_the_whole_output_is_kept_so_a_difference_anywhere_in_it_is_seen() -> None:
    """A 1,000-value output differs at one position 256 evenly spaced picks skip (issue 51: a sample
    read 9.2e-08 where the whole output differed by 1.3e-07): kept whole, the difference is there."""
    from drivers.measuring.outputs import SAMPLE, output_sample, output_values

    reference = np.linspace(-1, 1, 1000, dtype=np.float32).reshape(1, 1000)
    other = reference.copy()
    other[0, 5] += np.float32(1e-3)  # 256 picks over 1,000 take 0, 3, 7...: never 5
    assert output_values([reference]) == 1000
    ours, theirs = output_sample([reference]), output_sample([other])
    assert len(ours) == 1000
    assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) == pytest.approx(1e-3, rel=1e-3)
    picked = output_sample([reference], size=256), output_sample([other], size=256)
    assert max(abs(a - b) for a, b in zip(*picked, strict=True)) == 0.0  # what a 256-value sample saw
    big = np.zeros(SAMPLE + 10, dtype=np.float32)
    assert len(output_sample([big])) == SAMPLE  # bounded: a result carries at most SAMPLE values
    assert output_values([big, np.array(["text"])]) == SAMPLE + 10  # strings are not values
