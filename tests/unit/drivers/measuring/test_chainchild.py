"""The GPU claim's measurement (`drivers.measuring.chainchild.throughput`): the chain kernel's own
speed, its inputs placed on the device once and only the steps timed (issue 54: timed with the
copies, an H100's claim fell under what a 3x liar's larger round showed, and the liar was borne
out). Run on torch's CPU device, the chain's documented test device: the mechanism, not a speed."""

from __future__ import annotations

from typing import Any

import pytest
from kit.extras import needs

from drivers.measuring import chainchild

pytestmark = needs("torch")


def test_the_claim_times_the_steps_alone_with_the_inputs_placed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    placed: list[int] = []
    stepped: list[int] = []
    place, step = chainchild._placed, chainchild._steps

    def counted_place(x0: Any, b: Any, device: str) -> Any:
        placed.append(len(x0))
        return place(x0, b, device)

    def counted_steps(x: Any, weights: Any, steps: int) -> Any:
        stepped.append(steps)
        return step(x, weights, steps)

    monkeypatch.setattr(chainchild, "_placed", counted_place)
    monkeypatch.setattr(chainchild, "_steps", counted_steps)
    gflops = chainchild.throughput("cpu", 0.05, n=64, steps=3)
    assert gflops > 0
    assert placed == [64]  # once, before the timed repeats
    assert stepped[0] == 1  # the warm-up
    assert len(stepped) >= 2  # then the timed repeats, each the steps only
    assert set(stepped[1:]) == {3}


def test_a_round_still_copies_its_inputs_in_and_its_rows_out_as_int16() -> None:
    x0, b = chainchild.expand(7, 32)
    rows = chainchild.chain(x0, b, 2, "cpu")
    assert rows.dtype.name == "int16"
    assert rows.shape == (32, chainchild.WIDTH)
    assert [rows[i].tobytes() for i in (0, 31)] == chainchild.exact_rows(7, 32, 2, (0, 31))
