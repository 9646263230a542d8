"""FLOPs and bytes of one inference, counted from an ONNX graph (the roofline's x and y per model).

How it counts: `onnx.shape_inference.infer_shapes` (strict off, `data_prop` on) gives each value's
shape; a dimension that stays symbolic (a dynamic batch `N`, a sequence length) is taken as 1 and
named in `GraphCost.assumed`. Then, per node:

- `MatMul`, `MatMulInteger`, `QLinearMatMul`: A [..., M, K] x B [..., K, N] is 2 M K N operations
  for every one of the output's leading (broadcast) dimensions;
- `Gemm`: 2 M K N (after `transA` / `transB`), plus M N when C is added;
- `Conv`, `ConvInteger`, `QLinearConv`: 2 x the output's elements x (input channels / group) x the
  kernel's elements (a bias adds the output's elements);
- `ConvTranspose`: 2 x the input's elements x (output channels / group) x the kernel's elements;
- any other node is not counted (element-wise, pooling, normalisation: small against these in the
  models measured here) and its op type is listed in `GraphCost.uncounted`; a counted node whose
  shapes inference could not give is listed in `GraphCost.unknown`.

Bytes are what one inference must move if no activation stays in cache: every initializer once
(the weights), plus each counted node's activation inputs and outputs (elements x element size).
It is a model of traffic, not a measurement: the roofline's arithmetic intensity is FLOPs / bytes.

The file is untrusted: count it in a child (as the measuring child and the intake child do), under
their limits; a model whose graph cannot be read is a `ValueError` naming the file and the stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

MATMULS: Final = frozenset({"MatMul", "MatMulInteger", "QLinearMatMul"})
CONVS: Final = frozenset({"Conv", "ConvInteger", "QLinearConv"})
COUNTED: Final = MATMULS | CONVS | {"Gemm", "ConvTranspose"}


@dataclass(frozen=True)
class GraphCost:
    """One inference's counted operations and bytes, and what the count could not see."""

    flops: float
    bytes: float
    weights_bytes: float
    counted_nodes: int
    uncounted: tuple[str, ...] = ()  # op types present but not counted
    unknown: tuple[str, ...] = ()  # counted nodes whose shapes stayed unknown
    assumed: tuple[str, ...] = field(default=())  # symbolic dimensions taken as 1

    @property
    def intensity(self) -> float:
        """Operations per byte moved (the roofline's x)."""
        return self.flops / self.bytes if self.bytes > 0 else 0.0


def graph_cost(path: Path) -> GraphCost:
    """The model's cost per inference (module docstring).

    Raises:
        ValueError: the graph could not be read or its shapes inferred (names the file and stage).
    """
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # the library's parse errors, whatever their type
        raise ValueError(f"{path.name}: load: {type(exc).__name__}: {exc}") from exc
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise ValueError(f"{path.name}: shape inference: {type(exc).__name__}: {exc}") from exc
    return _count(inferred.graph)


def _count(graph: Any) -> GraphCost:
    from onnx import helper

    assumed: set[str] = set()
    shapes: dict[str, tuple[int, ...]] = {}
    sizes: dict[str, int] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        shape = _shape(info, assumed)
        if shape is not None:
            shapes[info.name] = shape
            sizes[info.name] = _itemsize(helper, info.type.tensor_type.elem_type)
    weights = {init.name for init in graph.initializer}
    for init in graph.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
        sizes[init.name] = _itemsize(helper, init.data_type)
    weights_bytes = float(sum(math.prod(shapes[n]) * sizes[n] for n in weights))
    flops, moved, counted = 0.0, 0.0, 0
    uncounted: set[str] = set()
    unknown: list[str] = []
    for node in graph.node:
        if node.op_type not in COUNTED:
            uncounted.add(node.op_type)
            continue
        ops = _node_flops(node, shapes)
        if ops is None:
            unknown.append(node.name or node.op_type)
            continue
        flops += ops
        counted += 1
        names = [n for n in (*node.input, *node.output) if n and n not in weights and n in shapes]
        moved += sum(math.prod(shapes[n]) * sizes[n] for n in names)
    return GraphCost(flops, weights_bytes + moved, weights_bytes, counted, tuple(sorted(uncounted)),
                     tuple(unknown), tuple(sorted(assumed)))  # fmt: skip


def _shape(info: Any, assumed: set[str]) -> tuple[int, ...] | None:
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        else:
            assumed.add(d.dim_param or "?")
            dims.append(1)
    return tuple(dims)


def _itemsize(helper: Any, elem_type: int) -> int:
    try:
        import numpy as np

        return int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4


def _node_flops(node: Any, shapes: dict[str, tuple[int, ...]]) -> float | None:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs = [shapes.get(n) for n in node.input]
    out = shapes.get(node.output[0]) if node.output else None
    op = node.op_type
    if op in MATMULS:
        a, b = (inputs[0], inputs[3]) if op == "QLinearMatMul" else (inputs[0], inputs[1])
        return _matmul(a, b, out)
    if op == "Gemm":
        return _gemm(inputs, attrs)
    w = inputs[3] if op == "QLinearConv" else (inputs[1] if len(inputs) > 1 else None)
    if op == "ConvTranspose":
        x = inputs[0]
        if x is None or w is None:
            return None
        return 2.0 * math.prod(x) * w[1] * math.prod(w[2:])  # weight [C_in, C_out / group, *kernel]
    if out is None or w is None:
        return None
    bias = len(node.input) > 2 and bool(node.input[2]) and op == "Conv"
    return 2.0 * math.prod(out) * w[1] * math.prod(w[2:]) + (math.prod(out) if bias else 0)


def _matmul(a: Sequence[int] | None, b: Sequence[int] | None, out: Sequence[int] | None) -> float | None:
    if a is None or b is None or not a or not b:
        return None
    m = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    n = b[-1] if len(b) >= 2 else 1
    lead = math.prod(out[:-2]) if out is not None and len(out) > 2 else 1
    return 2.0 * m * k * n * lead


def _gemm(inputs: Sequence[tuple[int, ...] | None], attrs: dict[str, Any]) -> float | None:
    a, b = inputs[0], inputs[1]
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
    n = b[0] if attrs.get("transB", 0) else b[1]
    return 2.0 * m * k * n + (m * n if len(inputs) > 2 and inputs[2] is not None else 0)


__all__ = ["COUNTED", "GraphCost", "graph_cost"]
