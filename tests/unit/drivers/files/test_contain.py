"""Broken and hostile model files through the real harness: each fails in the spawned child, at its stage,
named for the model, and the calling process carries on to measure a good model."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from kit.badfiles import BAD_FILES
from onnx import TensorProto, helper

from drivers import TaskFailed, measure
from drivers.files.models import IR_VERSION, OPSET, write_convnet
from protocol import ComputeUnit, FailureReason, Stage, TaskSpec

SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=3, warmups=1, load_runs=1, processes=1, threads=1)


def _failure(path: Path, name: str) -> TaskFailed:
    with pytest.raises(TaskFailed) as info:
        measure(path, SPEC, name=name)
    return info.value


@pytest.mark.parametrize("file_name", sorted(BAD_FILES))
def test_a_bad_file_fails_in_the_child_at_its_stage_named_for_the_model(
    tmp_path: Path, file_name: str
) -> None:
    build, stage = BAD_FILES[file_name]
    cached = build(tmp_path / file_name)
    failure = _failure(cached, f"campaign-{file_name}")
    assert failure.stage == stage
    assert failure.reason == FailureReason.FORMAT
    assert failure.detail.startswith(f"campaign-{file_name}: {stage.value} failed: ")
    assert "Traceback" not in failure.detail
    assert "\n" not in failure.detail


def test_the_caller_measures_a_good_model_after_every_bad_one(tmp_path: Path) -> None:
    for file_name, (build, _) in BAD_FILES.items():
        with pytest.raises(TaskFailed):
            measure(build(tmp_path / file_name), SPEC)
    assert measure(write_convnet(tmp_path / "good.onnx"), SPEC).inference_ms.n == 3


def _with_input(path: Path, value_info: onnx.ValueInfoProto, node: onnx.NodeProto, domain: str = "") -> Path:
    out = helper.make_tensor_value_info("y", TensorProto.INT64, [])
    graph = helper.make_graph([node], "g", [value_info], [out])
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION), path)
    return path


def _string_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("text", TensorProto.STRING, [1])
    return _with_input(path, x, helper.make_node("Size", ["text"], ["y"]))


def _sequence_model(path: Path) -> Path:
    x = helper.make_tensor_sequence_value_info("frames", TensorProto.FLOAT, None)
    return _with_input(path, x, helper.make_node("SequenceLength", ["frames"], ["y"]))


def _map_model(path: Path) -> Path:
    map_type = helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    )
    x = helper.make_value_info("features", map_type)
    node = helper.make_node(
        "DictVectorizer", ["features"], ["y"], domain="ai.onnx.ml", int64_vocabulary=[1, 2]
    )
    path = _with_input(path, x, node, domain="ai.onnx.ml")
    model = onnx.load(path)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2]))
    onnx.save(model, path)
    return path


@pytest.mark.parametrize(
    ("build", "input_name", "type_fragment"),
    [
        (_string_model, "text", "tensor(string)"),
        (_sequence_model, "frames", "seq("),
        (_map_model, "features", "map("),
    ],
    ids=["string", "sequence", "map"],
)
def test_an_unsupported_input_type_is_refused_at_inspection_naming_the_input(
    tmp_path: Path, build: object, input_name: str, type_fragment: str
) -> None:
    model = build(tmp_path / "m.onnx")  # type: ignore[operator]
    failure = _failure(model, "tokenizer.onnx")
    assert (failure.reason, failure.stage) == (FailureReason.INPUT, Stage.INSPECT)
    assert failure.detail.startswith(f"tokenizer.onnx: inspect failed: input {input_name!r}")
    assert type_fragment in failure.detail
