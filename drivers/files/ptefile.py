"""What an ExecuTorch program (.pte) says about where its operators run, read from its bytes.

A .pte is a flatbuffer (`program.fbs`, identifier `ET12`) with an optional extended header (`eh00`)
and segments after it. Each execution plan's chains hold instructions: a `KernelCall` runs one
operator on ExecuTorch's own CPU kernels (portable or optimized), a `DelegateCall` hands a lowered
partition to a backend (`BackendDelegate.id`, e.g. `XnnpackBackend`), whose payload is the backend's
own graph. For XNNPACK the payload is an `XNNGraph` flatbuffer behind an `XH00` header; its `xnodes`
are the nodes XNNPACK runs. So the share on XNNPACK is its nodes over its nodes plus the kernel calls
(`executorch_prim::` calls are scalar bookkeeping, left out); another backend's partition counts as
one node on that backend.

Read with the `flatbuffers` package's table reader and the schemas' field order (the generated
readers live under `executorch.exir`, whose import pulls the whole export toolchain: seconds per
child). Untrusted bytes: read only in the measuring child, every offset checked by the reader (an
out-of-range one raises, turned into a `FORMAT` failure), the tables visited bounded by the file's
length however they point at each other.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from drivers.errors import TaskFailed
from protocol import FailureReason

IDENTIFIER_PREFIX: Final = b"ET"
XNNPACK_ID: Final = "XnnpackBackend"
PRIM_PREFIX: Final = "executorch_prim::"
_KERNEL_CALL: Final = 1  # InstructionArguments union: NONE, KernelCall, DelegateCall, MoveCall, ...
_DELEGATE_CALL: Final = 2
_SEGMENT: Final = 1  # DataLocation: INLINE, SEGMENT
_XNN_MAGIC: Final = b"XH00"


@dataclass(frozen=True)
class PteCounts:
    """Where a program's operators run.

    Attributes:
        kernels: operator calls on ExecuTorch's own CPU kernels (bookkeeping calls left out).
        delegated: nodes per backend id (XNNPACK: the nodes of its graphs; others: 1 per partition).
        partitions: delegate calls per backend id.
    """

    kernels: int
    delegated: dict[str, int]
    partitions: dict[str, int]

    @property
    def total(self) -> int:
        """Every counted node, delegated or not."""
        return self.kernels + sum(self.delegated.values())


class _Reader:
    """Field access over one flatbuffer, offsets checked against its length."""

    def __init__(self, buf: bytes) -> None:
        import flatbuffers

        self.fb, self.buf = flatbuffers, buf
        self.budget = len(buf) // 4  # tables visited in all: linear in the bytes, whatever points where

    def root(self, at: int = 0) -> Any:
        (offset,) = struct.unpack_from("<I", self.buf, at)
        return self.fb.table.Table(bytearray(self.buf), at + offset)

    def table(self, table: Any, slot: int) -> Any | None:
        o = table.Offset(4 + 2 * slot)
        return self.fb.table.Table(table.Bytes, table.Indirect(table.Pos + o)) if o else None

    def tables(self, table: Any, slot: int) -> list[Any]:
        o = table.Offset(4 + 2 * slot)
        if not o:
            return []
        start, count = table.Vector(o), table.VectorLen(o)
        self.budget -= count
        if self.budget < 0:
            raise ValueError(f"more tables than {len(self.buf)} bytes can hold")
        return [self.fb.table.Table(table.Bytes, table.Indirect(start + 4 * i)) for i in range(count)]

    def scalar(self, table: Any, slot: int, kind: Any, default: int = 0) -> int:
        o = table.Offset(4 + 2 * slot)
        return int(table.Get(kind, table.Pos + o)) if o else default

    def text(self, table: Any, slot: int) -> str:
        o = table.Offset(4 + 2 * slot)
        return table.String(table.Pos + o).decode("utf-8", "replace") if o else ""

    def blob(self, table: Any, slot: int) -> bytes:
        o = table.Offset(4 + 2 * slot)
        if not o:
            return b""
        start, count = table.Vector(o), table.VectorLen(o)
        if start + count > len(self.buf):
            raise ValueError("a byte vector past the end of the program")
        return bytes(self.buf[start : start + count])


def read_counts(data: bytes) -> PteCounts:
    """Count where the operators of every execution plan of a .pte run.

    Raises:
        TaskFailed: FORMAT, when the bytes are not a program this reader can follow.
    """
    try:
        return _counts(data)
    except (ValueError, IndexError, struct.error, UnicodeError) as exc:
        raise TaskFailed(FailureReason.FORMAT, f"not a readable ExecuTorch program: {exc}") from exc


def _counts(data: bytes) -> PteCounts:
    program_size, segment_base = len(data), 0
    if data[8:12] == b"eh00":
        program_size, segment_base = struct.unpack_from("<QQ", data, 16)
    r = _Reader(data[:program_size])
    fb = r.fb.number_types
    program = r.root()
    inline = [r.blob(t, 0) for t in r.tables(program, 3)]
    segments = [
        (r.scalar(t, 0, fb.Uint64Flags), r.scalar(t, 1, fb.Uint64Flags)) for t in r.tables(program, 4)
    ]
    kernels, delegated, partitions = 0, Counter[str](), Counter[str]()
    for plan in r.tables(program, 1):
        operators = [r.text(op, 0) for op in r.tables(plan, 6)]
        delegates = r.tables(plan, 7)
        for chain in r.tables(plan, 5):
            for instruction in r.tables(chain, 2):
                kind = r.scalar(instruction, 0, fb.Uint8Flags)
                args = r.table(instruction, 1)
                if args is None:
                    continue
                if kind == _KERNEL_CALL:
                    kernels += not operators[r.scalar(args, 0, fb.Int32Flags)].startswith(PRIM_PREFIX)
                elif kind == _DELEGATE_CALL:
                    delegate = delegates[r.scalar(args, 0, fb.Int32Flags)]
                    backend = r.text(delegate, 0)
                    partitions[backend] += 1
                    payload = _payload(r, delegate, inline, segments, data, segment_base)
                    delegated[backend] += xnn_nodes(payload) if backend == XNNPACK_ID else 1
    return PteCounts(kernels, dict(delegated), dict(partitions))


def _payload(
    r: _Reader, delegate: Any, inline: list[bytes], segments: list[tuple[int, int]], data: bytes, base: int
) -> bytes:
    """A delegate's processed bytes, inline in the program or in a segment after it."""
    ref = r.table(delegate, 1)
    if ref is None:
        return b""
    kinds = r.fb.number_types
    location, index = r.scalar(ref, 0, kinds.Int8Flags), r.scalar(ref, 1, kinds.Uint32Flags)
    if location != _SEGMENT:
        return inline[index]
    offset, size = segments[index]
    if base + offset + size > len(data):
        raise ValueError("a delegate segment past the end of the file")
    return data[base + offset : base + offset + size]


def xnn_nodes(payload: bytes) -> int:
    """The nodes of an XNNPACK delegate's graph: `xnodes` of its XNNGraph (behind the XH00 header)."""
    if payload[4:8] == _XNN_MAGIC:
        offset, size = struct.unpack_from("<II", payload, 10)
        payload = payload[offset : offset + size]
    r = _Reader(payload)
    return len(r.tables(r.root(), 1))


__all__ = ["XNNPACK_ID", "PteCounts", "read_counts", "xnn_nodes"]
