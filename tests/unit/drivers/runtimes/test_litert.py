"""LiteRT: the probe, the delegated node count as placement, a forced fallback (an op XNNPACK does not
take), and measurements through the one harness, on .tflite models written offline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drivers import TaskFailed, check_model_file, measure
from drivers.files.litemodels import write_mlp
from drivers.runtimes.driver import LoadOptions
from drivers.runtimes.litert import LitertDriver, delegated_nodes
from protocol import ComputeUnit, FailureReason, ModelFormat, TaskSpec

CPU = ComputeUnit.CPU_LITERT


def _spec(**changes: object) -> TaskSpec:
    base: dict[str, object] = {"compute_unit": CPU, "runs": 12, "warmups": 2, "load_runs": 2, "threads": 1}
    return TaskSpec.model_validate(base | changes)


@pytest.mark.parametrize(
    ("nodes", "counted"),
    [
        ([("FULLY_CONNECTED", [0, 1, 2], [3]), ("RELU", [3], [4]), ("DELEGATE", [0, 1, 2], [4])], (2, 2)),
        (
            [
                ("FULLY_CONNECTED", [0, 1, 2], [3]),
                ("RELU", [3], [4]),
                ("CUMSUM", [4, 5], [6]),
                ("DELEGATE", [0, 1, 2], [4]),
            ],
            (2, 3),
        ),
        ([("CUMSUM", [0, 1], [2])], (0, 1)),
        ([], (0, 0)),
    ],
)
def test_a_delegate_node_counts_the_nodes_between_its_inputs_and_outputs(
    nodes: list[tuple[str, list[int], list[int]]], counted: tuple[int, int]
) -> None:
    assert delegated_nodes(nodes) == counted


def test_the_cpu_probe_really_runs_on_xnnpack() -> None:
    status = LitertDriver(CPU).probe()
    assert status.usable, status.reason
    assert status.provider == "XNNPACK (2/2 nodes)"


@pytest.mark.parametrize("unit", [ComputeUnit.GPU_LITERT, ComputeUnit.NPU_LITERT])
def test_gpu_and_npu_are_listed_with_why_they_are_not_measured(unit: ComputeUnit) -> None:
    status = LitertDriver(unit).probe()
    assert not status.usable
    assert "not measured by sark-node yet" in status.reason


def test_a_model_xnnpack_takes_whole_is_placed_on_it(tmp_path: Path) -> None:
    loaded = LitertDriver(CPU).load(write_mlp(tmp_path / "m.tflite"), LoadOptions(threads=1))
    placement = loaded.placement()
    assert (placement.providers, placement.node_share, placement.asked) == (
        ("XNNPACK",),
        {"XNNPACK": 1.0},
        "XNNPACK",
    )
    assert not placement.fell_back(1.0)
    (sig,) = loaded.inputs()
    assert (sig.name, sig.dtype, sig.shape) == ("x", "float32", (1, 64))
    out = loaded.runner({"x": np.ones((1, 64), dtype=np.float32)})()
    assert isinstance(out, list)
    assert out[0].shape == (1, 64)


def test_an_op_xnnpack_lacks_is_a_fallback_under_all_nodes_and_not_under_a_lower_share(
    tmp_path: Path,
) -> None:
    path = write_mlp(tmp_path / "m.tflite", unsupported_tail=True)
    placement = LitertDriver(CPU).load(path, LoadOptions(threads=1)).placement()
    assert placement.node_share == pytest.approx({"XNNPACK": 6 / 7, "builtin": 1 / 7})
    assert placement.fell_back(1.0)
    assert not placement.fell_back(0.8)


def test_a_forced_fallback_fails_a_strict_task_with_the_share(tmp_path: Path) -> None:
    path = write_mlp(tmp_path / "m.tflite", unsupported_tail=True)
    with pytest.raises(TaskFailed) as failed:
        measure(path, _spec())
    assert failed.value.reason == FailureReason.FALLBACK
    assert "86% of nodes on XNNPACK (least 100%)" in failed.value.detail


def test_a_lenient_fallback_is_measured_and_marked(tmp_path: Path) -> None:
    path = write_mlp(tmp_path / "m.tflite", unsupported_tail=True)
    m = measure(path, _spec(strict_placement=False))
    assert m.fallback
    assert m.placement() == "fallback: XNNPACK 86%, builtin 14%"
    assert m.inference_ms.n == 12


def test_a_measurement_on_litert_goes_through_the_one_harness(tmp_path: Path) -> None:
    m = measure(write_mlp(tmp_path / "m.tflite"), _spec(processes=2))
    assert (m.inference_ms.n, m.load_ms.n, m.warmups_used) == (24, 4, 2)
    assert (m.providers, m.node_share, m.fallback) == (("XNNPACK",), {"XNNPACK": 1.0}, False)
    assert "ai-edge-litert" in m.conditions.runtime_versions
    assert len(set(m.output_fingerprints)) == 1
    assert m.conditions.intra_op_threads == 1


@pytest.mark.parametrize(
    ("data", "said"),
    [(b"\x00" * 64, "no TFL3 identifier"), (b"\xff\xff\x00\x00TFL3" + b"\x00" * 8, "outside the file")],
)
def test_a_file_that_is_not_a_tflite_flatbuffer_is_refused_before_the_runtime(
    tmp_path: Path, data: bytes, said: str
) -> None:
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(TaskFailed) as failed:
        check_model_file(path, ModelFormat.TFLITE, allow_code_models=False)
    assert failed.value.reason == FailureReason.FORMAT
    assert said in failed.value.detail
