"""Issue 53, scope 2 (the roofline's counts): FLOPs and bytes per inference from an ONNX graph, with
shapes from onnx's shape inference, and what the count could not see named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from drivers.files.graphcost import graph_cost
from drivers.files.models import packaged_model, write_convnet


def test_a_convnets_convolutions_are_counted_exactly_and_the_rest_named(tmp_path: Path) -> None:
    cost = graph_cost(write_convnet(tmp_path / "c.onnx"))  # 3 convs of 3x3 at 64x64, 3 -> 16 -> 16 -> 16
    assert cost.flops == 2 * 64 * 64 * 16 * 9 * (3 + 16 + 16)
    assert cost.counted_nodes == 3
    assert cost.uncounted == ("Flatten", "GlobalAveragePool", "Relu")
    assert cost.assumed == ("N",)  # the dynamic batch, taken as 1
    assert cost.weights_bytes == 4 * 16 * 9 * (3 + 16 + 16)
    activations = 4 * 64 * 64 * (3 + 16 + 16 + 16 + 16 + 16)  # each conv's input and output
    assert cost.bytes == cost.weights_bytes + activations
    assert cost.intensity == cost.flops / cost.bytes


def test_a_batched_matmul_and_a_gemm_with_transposed_b_and_a_bias(tmp_path: Path) -> None:
    b = numpy_helper.from_array(np.ones((8, 5), dtype="float32"), "b")
    w = numpy_helper.from_array(np.ones((7, 5), dtype="float32"), "w")
    c = numpy_helper.from_array(np.ones((7,), dtype="float32"), "c")
    nodes = [
        helper.make_node("MatMul", ["x", "b"], ["m"]),  # [2, 3, 8] x [8, 5] -> [2, 3, 5]
        helper.make_node("Reshape", ["m", "shape"], ["r"]),
        helper.make_node("Gemm", ["r", "w", "c"], ["y"], transB=1),  # [6, 5] x [5, 7] + c
    ]
    shape = numpy_helper.from_array(np.array([6, 5], dtype="int64"), "shape")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 7])], initializer=[b, w, c, shape],
    )  # fmt: skip
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    cost = graph_cost(path)
    assert cost.flops == 2 * 2 * 3 * 8 * 5 + (2 * 6 * 5 * 7 + 6 * 7)
    assert cost.uncounted == ("Reshape",)
    assert cost.unknown == ()


def test_a_packaged_resnet50_counts_its_known_four_billion_multiply_adds() -> None:
    cost = graph_cost(packaged_model("light_resnet50"))
    assert 8.0e9 < cost.flops < 8.4e9  # ResNet-50: 4.1 G multiply-adds at 224 x 224
    assert cost.bytes > 4 * 25.5e6  # its 25.6 M float32 weights (made by ConstantOfShape here) at least


def test_a_file_that_is_no_graph_is_a_value_error_naming_it_and_the_stage(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    with pytest.raises(ValueError, match=r"^bad\.onnx: load: "):
        graph_cost(bad)
