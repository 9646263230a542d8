"""A fingerprint of a model's outputs for the inputs a task fed: what replicas of one class compare.

Each output array is reduced to `SIGNIFICANT` significant digits, then hashed (sha256 over each
array's dtype, shape and rounded values, in output order). Why 4 digits: fp32 carries about 7, and
within one device class (same CPU or GPU, same runtime version) a deterministic CPU kernel gives the
same bits run after run; what differs between honest replicas is the order of a multithreaded or GPU
reduction, a relative difference of order 1e-6 (fp32) to 1e-3 (fp16 accumulations). Rounding to 4
digits absorbs the first with room; values smaller than `FLOOR` x the array's largest magnitude are
taken as 0 (a cancellation's residue has no significant digits to keep). What rounding cannot
absorb: an element that sits on a rounding boundary flips when the two devices straddle it; the
chance is about (elements) x (relative difference) / 1e-4, small for classifier logits on one class,
and a mismatch is settled by a third replica like any other disagreement, never refused alone. A
worker that skips the run, returns cached outputs or runs another model gives different digits.

A generate task's outputs are its greedy texts, already in its raw records: the submitter derives
their fingerprint itself (`protocol.genstats.outputs_fingerprint`) for a task on the worker's own
model; a served model's texts (black- or gray-box) are not compared (a server's batching may change
a greedy answer), and `Measurement.output_fingerprints` is empty there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

SIGNIFICANT: Final = 4
FLOOR: Final = 1e-6
SAMPLE: Final = 1 << 16  # values kept for comparing runtimes (`Measurement.output_sample`'s bound)
FLOAT32_MAX: Final = 3.4028234663852886e38


def output_fingerprint(outputs: object) -> str:
    """`sha256:` and the hex digest of the rounded outputs ("" when there is nothing array-like)."""
    import numpy as np

    arrays = [np.asarray(a) for a in _arrays(outputs)]
    if not arrays:
        return ""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(_rounded(array).tobytes())
    return f"sha256:{digest.hexdigest()}"


def output_values(outputs: object) -> int:
    """How many numeric values the outputs hold, all arrays together (what `output_sample` samples)."""
    import numpy as np

    return sum(int(np.asarray(a).size) for a in _arrays(outputs) if np.asarray(a).dtype.kind in "fiub")


def output_sample(outputs: object, size: int = SAMPLE) -> tuple[float, ...]:
    """The outputs' values, all arrays flattened in order: every one of them up to `size` (65,536: a
    classifier's logits, a detector's boxes, whole), else `size` of them at evenly spaced positions
    (the same positions on every runtime for the same output shapes). At 9 msgpack bytes a value the
    bound is 576 KiB of a result, which fits one envelope beside `MAX_SAMPLES` timings. A
    non-finite value is clipped to float32's range (NaN to 0), so the sample stays a plain number
    sequence."""
    import numpy as np

    arrays = [np.asarray(a) for a in _arrays(outputs)]
    flat = [a.astype(np.float64).ravel() for a in arrays if a.dtype.kind in "fiub" and a.size]
    if not flat:
        return ()
    values = np.concatenate(flat)
    picked = values[np.linspace(0, values.size - 1, num=min(size, values.size)).astype(np.int64)]
    clean = np.nan_to_num(picked, nan=0.0, posinf=FLOAT32_MAX, neginf=-FLOAT32_MAX)
    return tuple(float(v) for v in clean)


def _arrays(outputs: object) -> list[Any]:
    """The arrays in the runner's return value, in order: onnxruntime's list, Core ML's dict (by
    name), OpenVINO's results (in output order), a torch tensor or a tuple of them (moved to the CPU)."""
    if hasattr(outputs, "to_tuple"):  # OpenVINO's OVDict: keyed by output ports, which do not sort
        return _arrays(list(outputs.to_tuple()))
    if isinstance(outputs, Mapping):
        return [a for key in sorted(outputs) for a in _arrays(outputs[key])]
    if isinstance(outputs, list | tuple):
        return [a for item in outputs for a in _arrays(item)]
    if hasattr(outputs, "detach"):  # a torch tensor
        return [outputs.detach().cpu().float().numpy()]
    if hasattr(outputs, "dtype") and hasattr(outputs, "shape"):
        return [outputs]
    return []


def _rounded(array: Any) -> Any:
    """Floats to `SIGNIFICANT` significant digits as (mantissa, exponent) integers; others as they are."""
    import numpy as np

    if array.dtype.kind != "f" or array.size == 0:
        return np.ascontiguousarray(array)
    values = array.astype(np.float64)
    values = np.where(np.isfinite(values), values, 0.0)
    largest = float(np.max(np.abs(values)))
    values = np.where(np.abs(values) < FLOOR * largest, 0.0, values)
    exponent = np.floor(np.log10(np.abs(values), where=values != 0, out=np.zeros_like(values)))
    mantissa = np.round(values / 10.0 ** (exponent - (SIGNIFICANT - 1)))
    return np.stack([mantissa.astype(np.int64), exponent.astype(np.int64)])
