"""Hostile and broken model files, built from the formats' public specifications.

Each builder writes one file and returns its path. The honest builders (`write_safetensors`,
`write_gguf`) write valid files; a `lie` argument makes the header claim more bytes than the file has.
`BAD_FILES` names every broken file the containment tests submit, with the stage it must fail at;
`BILLION_LAUGHS` is a campaign file that is a YAML alias bomb.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from drivers.files.models import IR_VERSION, OPSET, write_convnet
from protocol import Stage

# The classic 9-level bomb: 10^9 strings from a few hundred bytes.
BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + chr(ord('a') + i - 1)] * 9)}]"
            for i in range(1, 9)
        ),
        "jobs: *i",
    ]
)

GGUF_F32: Final = 0
GGUF_TYPE_UINT32: Final = 4
GGUF_TYPE_STRING: Final = 8


def write_truncated_onnx(path: Path, keep: int = 100_000) -> Path:
    """The first `keep` bytes of a real convnet (about 320 KB): a protobuf cut mid-tensor."""
    whole = write_convnet(path.with_suffix(".whole"), channels=32, blocks=4)
    path.write_bytes(whole.read_bytes()[:keep])
    whole.unlink()
    return path


def write_text_as_onnx(path: Path) -> Path:
    """A text file with an .onnx name."""
    path.write_text("These are release notes, not a model.\n" * 40)
    return path


def write_empty(path: Path) -> Path:
    """A 0-byte file."""
    path.write_bytes(b"")
    return path


def write_missing_external_onnx(path: Path) -> Path:
    """A MatMul whose weight lives in `weights.bin` beside the model, which is not there."""
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    onnx.external_data_helper.set_external_data(weight, location="weights.bin")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", io[:1], io[1:], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    path.write_bytes(model.SerializeToString())
    return path


def write_safetensors(path: Path, *, lie: int = 0) -> Path:
    """Two float32 tensors; with `lie`, the last tensor's end offset claims `lie` bytes more than written."""
    a, b = np.ones((4, 4), np.float32), np.zeros((8,), np.float32)
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, a.nbytes]},
        "b": {"dtype": "F32", "shape": [8 + lie // 4], "data_offsets": [a.nbytes, a.nbytes + b.nbytes + lie]},
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.tobytes() + b.tobytes())
    return path


def _gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(
    path: Path,
    *,
    lie: int = 0,
    tensors: int = 2,
    arch: str = "toy",
    metadata: Sequence[tuple[str, int | str]] = (),
) -> Path:
    """A GGUF v3 file with one string and one alignment metadata entry and `tensors` f32 [8, 4] tensors.

    With `lie`, the last tensor claims `lie` more rows than the data holds; `metadata` adds entries
    (an int as uint32, a str as a string) after the architecture's name `arch`.
    """
    alignment = 32
    out = b"GGUF" + struct.pack("<IQQ", 3, tensors, 2 + len(metadata))
    out += _gguf_string("general.architecture") + struct.pack("<I", GGUF_TYPE_STRING) + _gguf_string(arch)
    for key, value in metadata:
        out += _gguf_string(key)
        if isinstance(value, str):
            out += struct.pack("<I", GGUF_TYPE_STRING) + _gguf_string(value)
        else:
            out += struct.pack("<II", GGUF_TYPE_UINT32, value)
    out += _gguf_string("general.alignment") + struct.pack("<II", GGUF_TYPE_UINT32, alignment)
    nbytes = 8 * 4 * 4
    for i in range(tensors):
        rows = 8 + (lie if i == tensors - 1 else 0)
        out += _gguf_string(f"blk.{i}.weight") + struct.pack("<I", 2) + struct.pack("<QQ", 4, rows)
        out += struct.pack("<IQ", GGUF_F32, i * nbytes)
    out += b"\0" * (-len(out) % alignment)
    out += np.arange(tensors * 32, dtype=np.float32).tobytes()
    path.write_bytes(out)
    return path


def write_lying_safetensors(path: Path) -> Path:
    """A safetensors file whose header claims a tensor 1 MiB longer than the file."""
    return write_safetensors(path, lie=1 << 20)


def write_lying_gguf(path: Path) -> Path:
    """A GGUF file whose last tensor claims 100 000 more rows than the file holds."""
    return write_gguf(path, lie=100_000)


BAD_FILES: Final[dict[str, tuple[Callable[[Path], Path], Stage]]] = {
    "truncated.onnx": (write_truncated_onnx, Stage.INSPECT),
    "notes.onnx": (write_text_as_onnx, Stage.INSPECT),
    "empty.onnx": (write_empty, Stage.INSPECT),
    "lying.safetensors": (write_lying_safetensors, Stage.INSPECT),
    "lying.gguf": (write_lying_gguf, Stage.INSPECT),
    "external.onnx": (write_missing_external_onnx, Stage.INSPECT),
}
"""Every broken file: name -> (builder, the stage it must fail at)."""
