"""Model file checks made before any runtime (or pickle) sees the bytes.

Refused: pickle streams and pickle-bearing archives (`.pkl`, legacy and zip `torch.save` whole
models), torch programs without the owner's opt-in, and ONNX external data that points outside the
model's directory (absolute, `..`, or a symlink) or is missing; safetensors and GGUF headers that
lie about their tensors (`drivers.files.headers`); an ONNX file that is not a protobuf with a graph, a
torch program that is not a zip archive, and a .tflite without the `TFL3` flatbuffer identifier or
whose root table lies outside the file (LiteRT's interpreter verifies the rest as it loads, in the
same child), a .pte without an `ET` identifier or whose root or extended header points outside the
file (ExecuTorch verifies the program's internal consistency as it loads). ONNX files are walked at
the protobuf wire level, so no `onnx` package is needed and tensor bytes are skipped, not read.

`detect_format` reads only the name; `check_model_file` reads the bytes and so runs only in a
spawned child: the worker's (`drivers.measuring.child`), and the submitter's before it sends a model
(`node.intake`), never in the node itself.
"""

from __future__ import annotations

import mmap
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Final

from drivers.errors import TaskFailed
from drivers.files.headers import check_gguf, check_safetensors
from protocol import FailureReason, ModelFormat

PICKLE_SUFFIXES: Final = frozenset({".pkl", ".pickle", ".joblib", ".dill"})
SUFFIX_FORMATS: Final = {
    ".onnx": ModelFormat.ONNX,
    ".pt2": ModelFormat.TORCH_EXPORT,
    ".pt": ModelFormat.TORCHSCRIPT,
    ".pth": ModelFormat.TORCHSCRIPT,
    ".jit": ModelFormat.TORCHSCRIPT,
    ".ts": ModelFormat.TORCHSCRIPT,
    ".torchscript": ModelFormat.TORCHSCRIPT,
    ".mlpackage": ModelFormat.COREML,
    ".mlmodel": ModelFormat.COREML,
    ".gguf": ModelFormat.GGUF,
    ".safetensors": ModelFormat.SAFETENSORS,
    ".tflite": ModelFormat.TFLITE,
    ".pte": ModelFormat.PTE,
}
CODE_FORMATS: Final = frozenset({ModelFormat.TORCH_EXPORT, ModelFormat.TORCHSCRIPT})
# ONNX protobuf schema, only the paths that can lead to a TensorProto: message -> {field: message}.
_SCHEMA: Final[dict[str, dict[int, str]]] = {
    "model": {7: "graph", 25: "function"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "function": {7: "node"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
    "tensor": {13: "entry"},
}
_TENSOR_EXTERNAL_DATA: Final = 13
_MODEL_GRAPH: Final = 7


def detect_format(path: Path) -> ModelFormat:
    """The model format named by a file's suffix.

    Raises:
        TaskFailed: FORMAT for pickle suffixes and unknown ones.
    """
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        raise TaskFailed(FailureReason.FORMAT, "pickle files are refused (they run code when loaded)")
    if suffix not in SUFFIX_FORMATS:
        raise TaskFailed(FailureReason.FORMAT, f"unknown model format {suffix or '(no suffix)'!r}")
    return SUFFIX_FORMATS[suffix]


def check_model_file(path: Path, fmt: ModelFormat, *, allow_code_models: bool) -> None:
    """Refuse a model file that is unsafe or not what it claims, before pickle or a runtime opens it.

    Reads the file's bytes: call it only where a failure cannot take the node down (the child).

    Args:
        path: the model file (a directory for an `.mlpackage` or a safetensors folder).
        fmt: the format the task says it is.
        allow_code_models: the owner opted in to torch programs, which run code when loaded.

    Raises:
        TaskFailed: FORMAT with the reason (the caller names the model; the detail says the cause).
    """
    if fmt in (ModelFormat.COREML, ModelFormat.SAFETENSORS) and path.is_dir():
        if fmt == ModelFormat.SAFETENSORS:
            for shard in sorted(path.glob("*.safetensors")):
                _at_shard(shard)
        return
    if not path.is_file():
        raise TaskFailed(FailureReason.FORMAT, "not a regular file")
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise TaskFailed(FailureReason.FORMAT, "pickle files are refused (they run code when loaded)")
    if path.stat().st_size == 0:
        raise TaskFailed(FailureReason.FORMAT, "empty file (0 bytes)")
    with path.open("rb") as f:
        head = f.read(4)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        raise TaskFailed(FailureReason.FORMAT, "a pickle stream (legacy torch.save) is refused")
    if head == b"PK\x03\x04":
        _check_archive(path, fmt)
    if fmt in CODE_FORMATS and not allow_code_models:
        raise TaskFailed(
            FailureReason.FORMAT, f"{fmt.value} runs code when loaded; the owner has not opted in"
        )
    if fmt in CODE_FORMATS and head != b"PK\x03\x04":
        raise TaskFailed(
            FailureReason.FORMAT,
            f"not a zip archive (torch.jit.save and torch.export.save write one: {fmt.value})",
        )
    if fmt == ModelFormat.ONNX:
        _check_onnx(path)
    elif fmt == ModelFormat.GGUF:
        check_gguf(path)
    elif fmt == ModelFormat.SAFETENSORS:
        check_safetensors(path)
    elif fmt == ModelFormat.TFLITE:
        _check_tflite(path)
    elif fmt == ModelFormat.PTE:
        _check_pte(path)


def _check_tflite(path: Path) -> None:
    """A LiteRT flatbuffer: the `TFL3` identifier, and a root table that lies inside the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
    if len(head) < 8 or head[4:8] != b"TFL3":
        raise TaskFailed(FailureReason.FORMAT, "not a LiteRT flatbuffer (no TFL3 identifier)")
    root = int.from_bytes(head[:4], "little")
    if not 8 <= root < size:
        raise TaskFailed(FailureReason.FORMAT, f"the flatbuffer's root offset {root} is outside the file")


def _check_pte(path: Path) -> None:
    """An ExecuTorch program: an `ET` flatbuffer identifier, a root table inside the file, and an
    extended header (when there is one) whose program and segments lie inside the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(32)
    if len(head) < 8 or head[4:6] != b"ET" or not head[6:8].isdigit():
        raise TaskFailed(FailureReason.FORMAT, "not an ExecuTorch program (no ET flatbuffer identifier)")
    root = int.from_bytes(head[:4], "little")
    if not 8 <= root < size:
        raise TaskFailed(FailureReason.FORMAT, f"the program's root offset {root} is outside the file")
    if head[8:12] == b"eh00" and len(head) == 32:
        program, base = int.from_bytes(head[16:24], "little"), int.from_bytes(head[24:32], "little")
        if not root < program <= size or base > size:
            raise TaskFailed(FailureReason.FORMAT, "the program's extended header points outside the file")


def _at_shard(shard: Path) -> None:
    try:
        check_safetensors(shard)
    except TaskFailed as exc:
        raise TaskFailed(exc.reason, f"{shard.name}: {exc.detail}") from None


def _check_archive(path: Path, fmt: ModelFormat) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as exc:
        raise TaskFailed(FailureReason.FORMAT, "a damaged zip archive") from exc
    has_code = any("/code/" in n or n.startswith("code/") for n in names)
    exported = any(
        n.endswith(("archive_format", "serialized_exported_program.json")) or "/models/" in n for n in names
    )
    pickled = any(n.endswith("data.pkl") for n in names)
    if fmt == ModelFormat.ONNX:
        raise TaskFailed(FailureReason.FORMAT, "a zip archive, not an ONNX model")
    if pickled and not has_code and not exported:
        raise TaskFailed(FailureReason.FORMAT, "a whole-model torch.save pickle is refused")


def _check_onnx(path: Path) -> None:
    locations, problem = _onnx_locations(path)
    if problem:
        raise TaskFailed(FailureReason.FORMAT, f"not a valid ONNX protobuf ({problem})")
    if locations is None:
        raise TaskFailed(FailureReason.FORMAT, "not an ONNX model (no graph in its protobuf)")
    for location in locations:
        _check_location(path.parent, location)


def _onnx_locations(path: Path) -> tuple[list[str] | None, str]:
    """The external-data locations (None when the model has no graph), or why the protobuf walk failed.

    The failure is returned, not raised, so that no traceback still holds slices of the mapping when
    it is released (a live slice makes `mmap.close` raise BufferError).
    """
    problem = ""
    locations: list[str] = []
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            locations = list(external_locations(view))
            graph = any(number == _MODEL_GRAPH for number, _ in _length_fields(view))
        except (IndexError, ValueError, RecursionError) as exc:
            problem, graph = str(exc) or type(exc).__name__, True
        view.release()
    return (locations if graph else None), problem


def _check_location(root: Path, location: str) -> None:
    posix, windows = PurePosixPath(location), PureWindowsPath(location)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        raise TaskFailed(FailureReason.FORMAT, f"external data {location!r} is an absolute path")
    if ".." in posix.parts or ".." in windows.parts:
        raise TaskFailed(FailureReason.FORMAT, f"external data {location!r} leaves the model directory")
    target = root
    for part in posix.parts:
        target = target / part
        if target.is_symlink():
            raise TaskFailed(FailureReason.FORMAT, f"external data {location!r} goes through a symlink")
    if not target.is_file():
        raise TaskFailed(FailureReason.FORMAT, f"external data {location!r} is missing beside the model")


def external_locations(buf: memoryview, message: str = "model") -> Iterator[str]:
    """Every external-data `location` of every tensor in an ONNX ModelProto, read from the wire format."""
    schema = _SCHEMA[message]
    for number, value in _length_fields(buf):
        child = schema.get(number)
        if child == "entry":
            entry = dict(_length_fields(value))
            if bytes(entry.get(1, b"")) == b"location":
                yield bytes(entry.get(2, b"")).decode("utf-8", "replace")
        elif child is not None:
            yield from external_locations(value, child)


def _length_fields(buf: memoryview) -> Iterator[tuple[int, memoryview]]:
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("field runs past the end")
            yield number, buf[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("truncated field")


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
