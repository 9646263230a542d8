"""Small LiteRT (.tflite) models built offline, without TensorFlow, for tests and benchmarks.

No .tflite model ships in a PyPI wheel, and converting one needs TensorFlow or litert-torch. The
flatbuffer is written here with the schema's object API that `ai-edge-litert` itself ships
(`schema_py_generated`) and the `flatbuffers` package it depends on: real weights (seeded), real ops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

IDENTIFIER: Final = b"TFL3"


def _schema() -> Any:
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


class _Graph:
    """One subgraph as it is built: tensors, buffers, operator codes and operators."""

    def __init__(self) -> None:
        self.s = _schema()
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [self.s.BufferT()]  # buffer 0: the empty one every schema starts with
        self.codes: dict[int, int] = {}
        self.ops: list[Any] = []

    def tensor(self, name: str, shape: tuple[int, ...], data: Any = None, kind: str = "FLOAT32") -> int:
        t = self.s.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), getattr(self.s.TensorType, kind), 0
        if data is not None:
            import numpy as np

            buffer = self.s.BufferT()
            buffer.data = np.frombuffer(data.tobytes(), dtype=np.uint8)
            self.buffers.append(buffer)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, name: str, inputs: list[int], outputs: list[int], options: str = "", **fields: int) -> None:
        code = getattr(self.s.BuiltinOperator, name)
        self.codes.setdefault(code, len(self.codes))
        op = self.s.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = self.codes[code], inputs, outputs
        if options:
            op.builtinOptionsType = getattr(self.s.BuiltinOptions, options)
            op.builtinOptions = getattr(self.s, f"{options}T")()
            for key, value in fields.items():  # the options' fields (strides, fused activation...)
                setattr(op.builtinOptions, key, value)
        self.ops.append(op)

    def model(self, inputs: list[int], outputs: list[int]) -> bytes:
        import flatbuffers

        graph = self.s.SubGraphT()
        graph.tensors, graph.inputs, graph.outputs, graph.operators = self.tensors, inputs, outputs, self.ops
        graph.name = "main"
        codes = []
        for code in sorted(self.codes, key=self.codes.__getitem__):
            entry = self.s.OperatorCodeT()
            entry.builtinCode, entry.deprecatedBuiltinCode, entry.version = code, min(code, 127), 1
            codes.append(entry)
        model = self.s.ModelT()
        model.version, model.operatorCodes, model.subgraphs, model.buffers = 3, codes, [graph], self.buffers
        model.description = "sark-node test model"
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=IDENTIFIER)
        return bytes(builder.Output())


def mlp_model(*, width: int = 64, layers: int = 3, unsupported_tail: bool = False) -> bytes:
    """An MLP on float[1, width]: `layers` x (FULLY_CONNECTED, RELU), seeded He-init weights.

    With `unsupported_tail`, a CUMSUM follows: an op the XNNPACK delegate does not take, so it runs on
    LiteRT's built-in CPU kernels and the delegated share falls below all of the nodes.
    """
    import numpy as np

    rng = np.random.default_rng(1)
    g = _Graph()
    x = first = g.tensor("x", (1, width))
    for i in range(layers):
        w = (rng.standard_normal((width, width)) * np.sqrt(2.0 / width)).astype(np.float32)
        b = (rng.standard_normal(width) * 0.01).astype(np.float32)
        w_t, b_t = g.tensor(f"w{i}", (width, width), w), g.tensor(f"b{i}", (width,), b)
        h = g.tensor(f"h{i}", (1, width))
        g.op("FULLY_CONNECTED", [x, w_t, b_t], [h], "FullyConnectedOptions")
        x = g.tensor(f"r{i}", (1, width))
        g.op("RELU", [h], [x])
    if unsupported_tail:
        axis = g.tensor("axis", (), np.array(1, dtype=np.int32), kind="INT32")
        y = g.tensor("y", (1, width))
        g.op("CUMSUM", [x, axis], [y], "CumsumOptions")
        x = y
    return g.model([first], [x])


def convnet_model(*, channels: int = 32, layers: int = 4, size: int = 40) -> bytes:
    """A convnet on float[1, size, size, channels] (NHWC): `layers` x CONV_2D 3x3, stride 1, SAME
    padding, ReLU fused, seeded He-init weights; a few ms per inference on one CPU thread at the
    defaults (for timings that a scheduler tick does not move)."""
    import numpy as np

    rng = np.random.default_rng(1)
    g = _Graph()
    x = first = g.tensor("x", (1, size, size, channels))
    relu = _schema().ActivationFunctionType.RELU
    for i in range(layers):
        w = (rng.standard_normal((channels, 3, 3, channels)) * np.sqrt(2.0 / (9 * channels))).astype(
            np.float32
        )
        b = (rng.standard_normal(channels) * 0.01).astype(np.float32)
        w_t, b_t = g.tensor(f"w{i}", w.shape, w), g.tensor(f"b{i}", (channels,), b)
        y = g.tensor(f"c{i}", (1, size, size, channels))
        g.op(
            "CONV_2D", [x, w_t, b_t], [y], "Conv2DOptions", strideW=1, strideH=1, fusedActivationFunction=relu
        )
        x = y
    return g.model([first], [x])


def write_convnet(path: Path, **kwargs: Any) -> Path:
    """`convnet_model(**kwargs)` written to `path`."""
    path.write_bytes(convnet_model(**kwargs))
    return path


def write_mlp(path: Path, **kwargs: Any) -> Path:
    """`mlp_model(**kwargs)` written to `path`."""
    path.write_bytes(mlp_model(**kwargs))
    return path


__all__ = ["IDENTIFIER", "convnet_model", "mlp_model", "write_convnet", "write_mlp"]
