"""Bounded header checks of single-file weight formats: safetensors and GGUF.

Both formats put a header before the tensor bytes that says where every tensor lies. A header that
lies (a tensor past the end of the file, a size that does not match its shape, a length field of
petabytes) would make a runtime read out of bounds or allocate without limit, so the header is read
with every length checked against the bytes that remain before anything is allocated for it, and
every tensor's extent is checked against the file's size. Tensor bytes are never read.

Run in the spawned child (`drivers.measuring.child`), under its memory cap; the node itself never calls these.

Specifications: safetensors (huggingface/safetensors, "Format"), GGUF (ggml-org/ggml, docs/gguf.md).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from drivers.errors import TaskFailed
from protocol import FailureReason

SAFETENSORS_MAX_HEADER: Final = 100_000_000  # the reference implementation's own cap
SAFETENSORS_DTYPES: Final = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
GGUF_MAGIC: Final = b"GGUF"
GGUF_VERSIONS: Final = frozenset({2, 3})
GGUF_DEFAULT_ALIGNMENT: Final = 32
GGUF_MAX_DIMS: Final = 4  # GGML_MAX_DIMS
# GGUF metadata value types with a fixed size: type -> bytes. 8 is a string, 9 an array.
GGUF_FIXED: Final = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
GGUF_STRING: Final = 8
GGUF_ARRAY: Final = 9
GGUF_MAX_NESTING: Final = 4
# ggml tensor types: type -> (elements per block, bytes per block), as in gguf-py's GGML_QUANT_SIZES.
GGML_BLOCKS: Final = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
    21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
    27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66),
    39: (32, 17), 40: (64, 36), 41: (128, 18),
}  # fmt: skip
_MIN_KV: Final = 8 + 4 + 1  # an empty key, a type, one byte of value
_MIN_TENSOR_INFO: Final = 8 + 4 + 4 + 8  # an empty name, no dims, a type, an offset
_MAX_INTS: Final = 32  # a hostile file may name many such keys: a few are kept, never all
# `<architecture>.<suffix>` integers read (llama.cpp's llm_kv names, the same in llama, gemma3, qwen3,
# qwen3moe, llama4 and gpt-oss files); the architecture is read from the file, never listed here
INT_SUFFIXES: Final = (
    ".context_length", ".attention.sliding_window", ".expert_count", ".expert_used_count",
)  # fmt: skip
CHAT_TEMPLATE: Final = "tokenizer.chat_template"
PRESENCE: Final = frozenset({CHAT_TEMPLATE})


def _bad(detail: str) -> TaskFailed:
    return TaskFailed(FailureReason.FORMAT, detail)


# -- safetensors -------------------------------------------------------------------------------------


def check_safetensors(path: Path) -> None:
    """Check a safetensors file's header against the file: sizes, dtypes, shapes and offsets.

    Raises:
        TaskFailed: FORMAT naming the first lie found.
    """
    size = path.stat().st_size
    if size < 8:
        raise _bad(f"not a safetensors file: {size} bytes, shorter than the 8-byte header length")
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > min(size - 8, SAFETENSORS_MAX_HEADER):
            raise _bad(f"safetensors header claims {length} bytes, the file holds {size - 8} after it")
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(f"safetensors header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise _bad("safetensors header is not a JSON object")
    data_size = size - 8 - length
    for name, entry in header.items():
        if name != "__metadata__":
            _check_safetensor(str(name)[:80], entry, data_size)


def _check_safetensor(name: str, entry: object, data_size: int) -> None:
    if not isinstance(entry, dict):
        raise _bad(f"safetensors tensor {name!r}: not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in SAFETENSORS_DTYPES:
        raise _bad(f"safetensors tensor {name!r}: unknown dtype {str(dtype)[:20]!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise _bad(f"safetensors tensor {name!r}: shape is not a list of sizes")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and o >= 0 for o in offsets)
        and offsets[0] <= offsets[1]
    ):
        raise _bad(f"safetensors tensor {name!r}: data_offsets is not [begin, end]")
    begin, end = offsets
    if end > data_size:
        raise _bad(f"safetensors tensor {name!r}: ends at byte {end}, the data holds {data_size}")
    want = math.prod(shape) * SAFETENSORS_DTYPES[str(dtype)]
    if end - begin != want:
        raise _bad(
            f"safetensors tensor {name!r}: {dtype} {shape} needs {want} bytes, its offsets span {end - begin}"
        )


# -- GGUF --------------------------------------------------------------------------------------------


class _Reader:
    """Little-endian reads that never go past the file's end, nor allocate more than remains."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f, self.size, self.pos = f, size, 0

    def remaining(self) -> int:
        return self.size - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.remaining():
            raise _bad(
                f"GGUF {what} needs {n} bytes at offset {self.pos}, the file has {self.remaining()} left"
            )
        data = self.f.read(n)
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.remaining():
            raise _bad(
                f"GGUF {what} needs {n} bytes at offset {self.pos}, the file has {self.remaining()} left"
            )
        self.f.seek(n, 1)
        self.pos += n

    def u32(self, what: str) -> int:
        value: int = struct.unpack("<I", self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = struct.unpack("<Q", self.take(8, what))[0]
        return value

    def count(self, what: str, each: int) -> int:
        """A u64 count of items of at least `each` bytes, refused if they cannot fit in the file."""
        n = self.u64(what)
        if n * each > self.remaining():
            raise _bad(f"GGUF {what} is {n}, more than the {self.remaining()} bytes left could hold")
        return n

    def string(self, what: str) -> bytes:
        return self.take(self.count(f"{what} length", 1), what)


@dataclass(frozen=True)
class GgufHeader:
    """What a checked GGUF header says of the model before any tensor is read.

    Attributes:
        architecture: `general.architecture` ("llama"), or "" when the file names none.
        context_length: `<architecture>.context_length` (the tokens the model attends to), or None.
        chat_template: whether `tokenizer.chat_template` is there (a chat prompt needs it).
        sliding_window: `<architecture>.attention.sliding_window` (gemma3's local layers), or None.
        experts: `<architecture>.expert_count` and `.expert_used_count` (llama4, gpt-oss, qwen3moe: a
            mixture of experts), or None for a dense model.
    """

    architecture: str
    context_length: int | None
    chat_template: bool = False
    sliding_window: int | None = None
    experts: tuple[int, int] | None = None


def check_gguf(path: Path) -> GgufHeader:
    """Check a GGUF file's header: magic, version, counts, metadata and every tensor's extent.

    Returns:
        The architecture and context length the metadata declares (read on the way, at no extra cost).

    Raises:
        TaskFailed: FORMAT naming the first lie found.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        reader = _Reader(f, size)
        if size < 4 or reader.take(4, "magic") != GGUF_MAGIC:
            raise _bad("not a GGUF file (no GGUF magic)")
        version = reader.u32("version")
        if version not in GGUF_VERSIONS:
            raise _bad(f"GGUF version {version} is not supported (only {sorted(GGUF_VERSIONS)})")
        tensors = reader.count("tensor count", _MIN_TENSOR_INFO)
        kvs = reader.count("metadata count", _MIN_KV)
        architecture, ints, keys = _gguf_metadata(reader, kvs)
        alignment = ints.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
        if alignment <= 0 or alignment & (alignment - 1):
            raise _bad(f"GGUF alignment {alignment} is not a power of two")
        infos = [_gguf_tensor(reader) for _ in range(tensors)]
    data_start = -(-reader.pos // alignment) * alignment
    for name, offset, nbytes in infos:
        if offset % alignment:
            raise _bad(f"GGUF tensor {name!r}: offset {offset} is not aligned to {alignment}")
        if data_start + offset + nbytes > size:
            raise _bad(
                f"GGUF tensor {name!r}: {nbytes} bytes at data offset {offset} end past the file"
                f" ({size} bytes, data from {data_start})"
            )
    arch = architecture
    experts, used = ints.get(f"{arch}.expert_count"), ints.get(f"{arch}.expert_used_count")
    return GgufHeader(
        architecture,
        ints.get(f"{arch}.context_length"),
        chat_template=CHAT_TEMPLATE in keys,
        sliding_window=ints.get(f"{arch}.attention.sliding_window"),
        experts=(experts, used or 0) if experts else None,
    )


def _gguf_metadata(reader: _Reader, kvs: int) -> tuple[str, dict[str, int], set[str]]:
    """Walk the metadata: the architecture's name, `general.alignment`, the first few integers of the
    architecture keys read (`INT_SUFFIXES`), and whether the keys `PRESENCE` name are there."""
    architecture, ints, keys = "", dict[str, int](), set[str]()
    for _ in range(kvs):
        key = reader.string("metadata key").decode("utf-8", "replace")
        kind = reader.u32("metadata type")
        if key == "general.architecture" and kind == GGUF_STRING:
            architecture = reader.string("metadata string").decode("utf-8", "replace")[:80]
            continue
        if key in PRESENCE:
            keys.add(key)
        value = _gguf_value(reader, kind, 0)
        if isinstance(value, int) and (
            key == "general.alignment" or (key.endswith(INT_SUFFIXES) and len(ints) < _MAX_INTS)
        ):
            ints[key] = value
    return architecture, ints, keys


def _gguf_value(reader: _Reader, kind: int, depth: int) -> int | None:
    """Skip one metadata value; return it when it is an integer (general.alignment is one)."""
    if kind in GGUF_FIXED:
        raw = reader.take(GGUF_FIXED[kind], "metadata value")
        return int.from_bytes(raw, "little") if kind in (4, 10) else None  # uint32, uint64
    if kind == GGUF_STRING:
        reader.skip(reader.count("string length", 1), "metadata string")
        return None
    if kind != GGUF_ARRAY or depth >= GGUF_MAX_NESTING:
        raise _bad(
            f"GGUF metadata value type {kind} is unknown"
            if kind != GGUF_ARRAY
            else "GGUF arrays nest too deep"
        )
    item = reader.u32("array item type")
    if item in GGUF_FIXED:
        n = reader.count("array length", GGUF_FIXED[item])
        reader.skip(n * GGUF_FIXED[item], "array")
        return None
    for _ in range(reader.count("array length", 8)):
        _gguf_value(reader, item, depth + 1)
    return None


def _gguf_tensor(reader: _Reader) -> tuple[str, int, int]:
    """One tensor info: (name, offset, bytes), the bytes computed from its type and dimensions."""
    name = reader.string("tensor name").decode("utf-8", "replace")[:80]
    n_dims = reader.u32("tensor rank")
    if n_dims > GGUF_MAX_DIMS:
        raise _bad(f"GGUF tensor {name!r}: {n_dims} dimensions, at most {GGUF_MAX_DIMS}")
    dims = [reader.u64("tensor dimension") for _ in range(n_dims)]
    kind, offset = reader.u32("tensor type"), reader.u64("tensor offset")
    if kind not in GGML_BLOCKS:
        return name, offset, 0  # a type newer than this table: only its offset can be checked
    per_block, block_bytes = GGML_BLOCKS[kind]
    elements = math.prod(dims)
    if elements % per_block:
        raise _bad(f"GGUF tensor {name!r}: {elements} elements is not a whole number of type-{kind} blocks")
    return name, offset, elements // per_block * block_bytes
