"""The GPU challenge's kernel (`/sark/challenge/1.1.0`'s chain) through torch, and its spawned child.

`protocol.challenge` documents the chain: X0 and B expanded from the seed (`expand`, numpy's PCG64
on the CPU, `drivers.measuring.challengechild`'s, whose numpy chain is the CPU's kernel), then `steps` times
X <- (floor(X @ B / 4) mod 8192) - 4096 on the claimed device (`chain`), C = X as int16 rows, one
digest per row (`digests`). The
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
(`drivers.measuring.challengechild.answer`, the CPU challenge's child's rounds: the digests and rows are its,
over the result's own type, int16 here).
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

from drivers.measuring.challengechild import (
    HALF,
    MAX_N,
    WIDTH,
    WRAP,
    Floats,
    Ints,
    answer,
    chain_asked,
    digests,
    exact_rows,
    expand,
    row_bytes,
)


def chain(x0: Floats, b: Floats, steps: int, device: str) -> Ints:
    """X after `steps` steps on the torch `device`, as int16 (exact: see `protocol.challenge`)."""
    import torch

    x, weights = _placed(x0, b, device)
    x = _steps(x, weights, steps)
    out: Ints = x.to(torch.int16).cpu().numpy()
    return out


def _placed(x0: Floats, b: Floats, device: str) -> tuple[Any, Any]:
    """X0 and B as tensors on `device` (the host-to-device copy)."""
    import torch

    where = torch.device(device)
    return torch.from_numpy(x0).to(where), torch.from_numpy(b).to(where)


def _steps(x: Any, weights: Any, steps: int) -> Any:
    """`steps` steps of the chain on the tensors' device, ended by a synchronize on a GPU."""
    import torch

    other = torch.empty_like(x)
    for _ in range(steps):
        torch.mm(x, weights, out=other)
        other.mul_(0.25).floor_().remainder_(float(WRAP)).sub_(float(HALF))
        x, other = other, x
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    return x


def throughput(device: str, seconds: float = 0.6, *, n: int = MAX_N, steps: int = 16) -> float:
    """The chain's GFLOPS on `device`, the best of repeats over `seconds` (the calibration of a GPU
    claim: `Calibration.gpu_tflops[device]` is this over 1000, so the challenge meets the kernel
    its claim was measured on). The inputs are made and placed on the device once, outside the
    timed repeats, which time the steps alone: the kernel's own speed, the most any round of the
    challenge can show (a round also copies X0 and B in and X out, and hashes its rows). Timed with
    the copies, an H100 read 18.6 TFLOPS, under what a round sized for a claim three times that
    showed (24.9; a larger round spreads its copies thinner), so that a 3x claim was borne out
    (issue 54)."""
    import time

    name = _device(device)
    x0, b = expand(0, n)
    x, weights = _placed(x0, b, name)
    _steps(x, weights, 1)  # warm: the device's context, its handles, the first allocation
    best = float("inf")
    end = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        _steps(x, weights, steps)
        now = time.perf_counter()
        best = min(best, now - start)
        if now > end:
            return 2.0 * n * steps * WIDTH**2 / max(best, 1e-9) / 1e9


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
        named = chain_asked(asked)
        return None if named is None else chain(*expand(named[2], named[0]), named[1], name)

    answer(conn, start, chained)


__all__ = ["chain", "digests", "exact_rows", "expand", "main", "row_bytes", "throughput"]
