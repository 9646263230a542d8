"""The GPU challenge's kernel (`/sark/challenge/1.1.0`'s chain) through torch, and its spawned child.

`protocol.challenge` documents the chain: X0 and B expanded from the seed (`expand`, numpy's PCG64
on the CPU, as the CPU challenge's inputs are), then `steps` times X <- (floor(X @ B / 4) mod 8192)
- 4096 on the claimed device (`chain`), C = X as int16 rows, one digest per row (`digests`). The
inputs are expanded on the CPU, not drawn by a device generator: torch's CUDA generator (Philox)
is not the CPU's (mt19937), so the submitter, with no GPU, could not expand the same matrices; and
they are 2 n KiB + 1 MiB against 2 n 512**2 x steps of work.

`chain` runs the same code on any torch device: `cuda:N` on a GPU worker, `cpu` in the tests, which
so check the very kernel a GPU runs against the submitter's float64 recomputation (`exact_rows`).
TF32 is turned off (`torch.backends.cuda.matmul.allow_tf32 = False`, torch's documented switch):
X's entries need 12 significant bits and TF32 keeps 11, so with TF32 an honest GPU's rows would
be wrong (torch's matmul default is off since 1.12; set here whatever a caller set). The chain's
time ends at `torch.cuda.synchronize` (the product is asynchronous), before the rows are copied
back and hashed.

The child (`main`, started by `node.worker.challenge` with a duplex pipe and the device's name):
imports torch, checks the device, warms it (CUDA context, cuBLAS handle) with a small chain, says
`ready`; then for each `("chain", n, steps, seed)` answers `("commit", digests)`, for
`("reveal", rows)` answers `("rows", [bytes, ...])`; ends on anything else or when the pipe closes
(`drivers.challengechild.answer`, the CPU challenge's child's rounds: the digests and rows are its,
over the result's own type, int16 here).
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from drivers.challengechild import answer, digests, row_bytes

MAX_N: Final = 16384  # protocol.challenge.CHAIN_MAX_N
MAX_STEPS: Final = 2048  # protocol.challenge.CHAIN_MAX_STEPS
WIDTH: Final = 512  # protocol.challenge.CHALLENGE_WIDTH
WRAP: Final = 8192.0
HALF: Final = 4096.0

Ints = npt.NDArray[np.int16]


def expand(seed: int, n: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """X0 (n x WIDTH, integers in [-4096, 4096)) and B (WIDTH x WIDTH, in [-8, 8)) for `seed`:
    PCG64's raw words, the low 32 bits first, X0's top 13 bits, then B's top 4 (as float32)."""
    generator = np.random.PCG64(seed)
    x0 = _ints(generator, n * WIDTH, 19, 4096).reshape(n, WIDTH)
    return x0, _ints(generator, WIDTH * WIDTH, 28, 8).reshape(WIDTH, WIDTH)


def _ints(generator: np.random.PCG64, size: int, shift: int, offset: int) -> npt.NDArray[np.float32]:
    words = generator.random_raw((size + 1) // 2).astype("<u8", copy=False).view("<u4")[:size]
    out: npt.NDArray[np.float32] = (words >> shift).astype(np.float32)
    out -= np.float32(offset)
    return out


def chain(x0: npt.NDArray[np.float32], b: npt.NDArray[np.float32], steps: int, device: str) -> Ints:
    """X after `steps` steps on the torch `device`, as int16 (exact: see `protocol.challenge`)."""
    import torch

    where = torch.device(device)
    x = torch.from_numpy(x0).to(where)
    other = torch.empty_like(x)
    weights = torch.from_numpy(b).to(where)
    for _ in range(steps):
        torch.mm(x, weights, out=other)
        other.mul_(0.25).floor_().remainder_(WRAP).sub_(HALF)
        x, other = other, x
    if where.type == "cuda":
        torch.cuda.synchronize(where)
    out: Ints = x.to(torch.int16).cpu().numpy()
    return out


def throughput(device: str, seconds: float = 0.6, *, n: int = MAX_N, steps: int = 16) -> float:
    """The chain's GFLOPS on `device`, the best of repeats over `seconds` (the calibration of a GPU
    claim: `Calibration.gpu_tflops[device]` is this over 1000, so the challenge meets the kernel
    its claim was measured on). The inputs are made once, outside the timed repeats."""
    import time

    name = _device(device)
    x0, b = expand(0, n)
    chain(x0, b, 1, name)  # warm: the device's context, its handles, the first allocation
    best = float("inf")
    end = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        chain(x0, b, steps, name)
        now = time.perf_counter()
        best = min(best, now - start)
        if now > end:
            return 2.0 * n * steps * WIDTH**2 / max(best, 1e-9) / 1e9


def exact_rows(seed: int, n: int, steps: int, rows: Sequence[int]) -> list[bytes]:
    """The named rows of the chain in float64 on the CPU, as int16 bytes (the submitter's check:
    steps x len(rows) x WIDTH**2 multiply-adds, after expanding the seed)."""
    x0, b = expand(seed, n)
    x = x0[list(rows)].astype(np.float64)
    weights = b.astype(np.float64)
    for _ in range(steps):
        x = np.mod(np.floor(x @ weights / 4.0), WRAP) - HALF
    return [np.ascontiguousarray(row, dtype="<i2").tobytes() for row in x.astype(np.int16)]


def _device(name: str) -> str:
    """The torch device the chain runs on, or ValueError saying why it cannot."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    where = torch.device(name)
    if where.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"torch {torch.__version__} sees no CUDA device for {name}")
    if where.type == "cuda" and (where.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"{name}: torch sees {torch.cuda.device_count()} CUDA devices")
    if where.type not in ("cuda", "cpu"):
        raise ValueError(f"{name}: the chain runs on a CUDA device (or the CPU, in tests)")
    return name


def main(conn: Connection, device: str) -> None:
    """The child's entry (see the module docstring); never raises: a failure is a ("failed", why)."""
    name = ""

    def start() -> None:
        nonlocal name
        name = _device(device)
        chain(*expand(0, 64), 2, name)  # the device's context and handles made before any seed

    def chained(asked: tuple[Any, ...]) -> Ints | None:
        """("chain", n, steps, seed)'s rows, or None for any other request."""
        if asked[0] == "chain" and 0 < int(asked[1]) <= MAX_N and 0 < int(asked[2]) <= MAX_STEPS:
            return chain(*expand(int(asked[3]), int(asked[1])), int(asked[2]), name)
        return None

    answer(conn, start, chained)


__all__ = ["chain", "digests", "exact_rows", "expand", "main", "row_bytes", "throughput"]
