"""Input synthesis from a signature, and per-task overrides."""

from __future__ import annotations

import numpy as np
import pytest

from drivers import TaskFailed
from drivers.files.inputs import InputSig, fed, resolve_shape, synthesize
from protocol import FailureReason


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((None, 3, "H", "W"), (1, 3, 224, 224)),
        (("batch", None, None, None), (1, 3, 224, 224)),
        (("N", "T"), (1, 64)),
        ((2, None, 128), (2, 64, 128)),
        ((), ()),
        ((5, 7), (5, 7)),
    ],
)
def test_dynamic_dimensions_get_sane_defaults(
    shape: tuple[int | str | None, ...], expected: tuple[int, ...]
) -> None:
    assert resolve_shape(InputSig("x", "float32", shape), None) == expected


def test_floats_are_seeded_noise_ints_zeros_bools_false() -> None:
    sigs = [
        InputSig("x", "float32", ("N", 8)),
        InputSig("ids", "int64", ("N", "T")),
        InputSig("m", "bool", (4,)),
    ]
    a, b = synthesize(sigs), synthesize(sigs)
    assert a["x"].dtype == np.float32
    assert a["x"].shape == (1, 8)
    assert np.array_equal(a["x"], b["x"])
    assert float(np.std(a["x"].astype(np.float64))) > 0
    assert a["ids"].dtype == np.int64
    assert a["ids"].shape == (1, 64)
    assert not a["ids"].any()
    assert a["m"].dtype == np.bool_
    assert not a["m"].any()


def test_overrides_set_shapes_and_fill_values() -> None:
    sigs = [InputSig("input", "float32", (None, None)), InputSig("sr", "int64", ())]
    feeds = synthesize(sigs, {"input": (1, 512)}, {"sr": 16000})
    assert feeds["input"].shape == (1, 512)
    assert feeds["sr"].shape == ()
    assert int(feeds["sr"]) == 16000


@pytest.mark.parametrize(
    ("shapes", "values", "fragment"),
    [
        ({"nope": (1,)}, {}, "unknown inputs"),
        ({}, {"nope": 1.0}, "unknown inputs"),
        ({"x": (1, 3, 224)}, {}, "rank"),
        ({"x": (1, 4, 224, 224)}, {}, "fixed at 3"),
    ],
)
def test_bad_overrides_are_input_failures(
    shapes: dict[str, tuple[int, ...]], values: dict[str, float], fragment: str
) -> None:
    with pytest.raises(TaskFailed) as info:
        synthesize([InputSig("x", "float32", (None, 3, None, None))], shapes, values)
    assert info.value.reason == FailureReason.INPUT
    assert fragment in info.value.detail


def test_a_signature_without_shapes_needs_an_override() -> None:
    sig = InputSig("x", "float32", None)
    with pytest.raises(TaskFailed, match="declares no shape"):
        synthesize([sig])
    assert synthesize([sig], {"x": (2, 3)})["x"].shape == (2, 3)


def test_unsupported_dtype_is_an_input_failure() -> None:
    with pytest.raises(TaskFailed) as info:
        synthesize([InputSig("s", "str", (1,))])
    assert info.value.reason == FailureReason.INPUT


def test_what_was_fed_is_described_with_the_dimensions_that_got_a_default() -> None:
    sigs = [
        InputSig("image", "float32", ("N", 3, "H", "W")),
        InputSig("bytes", "int32", ("unk", 2048)),
        InputSig("mask", "bool", (4,)),
        InputSig("rate", "int64", ()),
    ]
    shapes, values = {"bytes": (2, 2048)}, {"rate": 16000.0}
    described = {i.name: i for i in fed(sigs, synthesize(sigs, shapes, values), shapes, values)}
    assert described["image"].label() == "image:float32[1,3,224,224]"
    assert (described["image"].fill, described["image"].defaulted_dims) == ("seeded_normal", (0, 2, 3))
    assert (described["bytes"].label(), described["bytes"].defaulted_dims) == ("bytes:int32[2,2048]", ())
    assert (described["mask"].fill, described["rate"].fill) == ("false", "constant")
