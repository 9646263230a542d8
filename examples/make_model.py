"""Build the small ONNX model the example campaign benchmarks (deterministic; needs `onnx` and numpy).

    python examples/make_model.py [--depth N] [--out examples/models/tiny-convnet.onnx]

A stride-2 stem, `depth` residual blocks of 3x3 convolutions with batch norm, global average pooling
and a classifier: a real convolutional network, small enough to measure in a second on a laptop.
`--depth` makes deeper variants of the same network (the report diff example compares two depths).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(depth: int = 4, width: int = 32, classes: int = 100, seed: int = 7) -> onnx.ModelProto:
    """A ResNet-style network on a 1x3x64x64 input."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(x: str, cin: int, cout: int, name: str, stride: int = 1, relu: bool = True) -> str:
        w = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        nodes.append(
            helper.make_node(
                "Conv", [x, const(f"{name}.w", w)], [f"{name}.c"], pads=[1, 1, 1, 1], strides=[stride, stride]
            )
        )
        bn = [
            const(f"{name}.{k}", v)
            for k, v in (
                ("g", 1 + 0.1 * rng.standard_normal(cout)),
                ("b", 0.1 * rng.standard_normal(cout)),
                ("m", 0.1 * rng.standard_normal(cout)),
                ("v", 1 + 0.1 * rng.random(cout)),
            )
        ]
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.c", *bn], [f"{name}.n"]))
        if not relu:
            return f"{name}.n"
        nodes.append(helper.make_node("Relu", [f"{name}.n"], [f"{name}.r"]))
        return f"{name}.r"

    x = conv_bn("input", 3, width, "stem", stride=2)
    for i in range(depth):
        h = conv_bn(x, width, width, f"b{i}.1")
        h = conv_bn(h, width, width, f"b{i}.2", relu=False)
        nodes.append(helper.make_node("Add", [x, h], [f"b{i}.add"]))
        nodes.append(helper.make_node("Relu", [f"b{i}.add"], [f"b{i}.out"]))
        x = f"b{i}.out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    fc = rng.standard_normal((width, classes)) * np.sqrt(1.0 / width)
    nodes.append(
        helper.make_node("Gemm", ["flat", const("fc.w", fc), const("fc.b", np.zeros(classes))], ["logits"])
    )
    graph = helper.make_graph(
        nodes,
        f"tiny-convnet-d{depth}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="sark-node")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models" / "tiny-convnet.onnx")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build(args.depth), args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
