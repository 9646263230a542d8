"""The challenge's kernel, the chain: inputs from a seed, the steps in numpy, a digest per row; its child.

`protocol.challenge` says what a challenge is and documents the chain; this module is its generator
(`expand`), the CPU's kernel (`chain`, numpy), the digests a worker commits (`digests`), the rows it
reveals (`row_bytes`) and the submitter's float64 recomputation of a few rows (`exact_rows`). The GPU
runs the same chain through torch (`drivers.measuring.chainchild`), with this module's generator, digests and
rounds (`answer`). The worker runs a kernel only in a spawned child (`main` here for the CPU, started
by `node.worker.challenge` with a duplex pipe), never in the daemon, which imports no numpy: the
parent names this module, it never imports it.

The child: imports numpy and starts its BLAS threads with a one-step chain (`Kernel.load`), says
`ready`, and waits: the worker starts one before any challenge is asked and keeps it between
challenges (`node.worker.challenge`: a spawn and numpy's import were most of a challenge's cost on a
busy machine). Each challenge begins with `("warm",)`: the last challenge's result is forgotten and
the child keeps the faster of one BLAS thread and all of them as timed now (`Kernel.warm`, about 15 ms
on a quiet core), answering `("warmed",)`; then for each `("chain", n, steps, seed)` it computes the
chain and answers `("commit", digests)`; for `("reveal", rows)` answers `("rows", [bytes, ...])`;
ends on anything else or when the parent closes the pipe.

Why a chain on the CPU too: a single product's inputs and result are as many bytes as its work over
512, and expanding and hashing them costs a CPU about as much as the product itself (on 2 cores with
AVX-512: 8,000 rows expanded in 8 ms, multiplied in 34 ms, hashed in 16 ms; honest devices measured
0.37 of a calibration taken the same minute, under the 1/2.5 the time bound allows). The chain's
inputs are 512 rows and B, reused `steps` times: its steps are the calibration's own 512 x 512
product, cache for cache, plus four cheap passes over X (0.91 of the calibration here).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

import numpy as np
import numpy.typing as npt

DIGEST_BYTES: Final = 16  # protocol.challenge.DIGEST_BYTES (the child imports no pydantic)
MAX_N: Final = 16384  # protocol.challenge.CHAIN_MAX_N
MAX_STEPS: Final = 2048  # protocol.challenge.CHAIN_MAX_STEPS
WIDTH: Final = 512  # protocol.challenge.CHALLENGE_WIDTH
WRAP: Final = 8192
HALF: Final = 4096

Floats = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int16]


def expand(seed: int, n: int) -> tuple[Floats, Floats]:
    """X0 (n x WIDTH, integers in [-4096, 4096)) and B (WIDTH x WIDTH, in [-8, 8)) for `seed`:
    PCG64's raw words, the low 32 bits first, X0's top 13 bits, then B's top 4 (as float32)."""
    generator = np.random.PCG64(seed)
    x0 = _ints(generator, n * WIDTH, 19, HALF).reshape(n, WIDTH)
    return x0, _ints(generator, WIDTH * WIDTH, 28, 8).reshape(WIDTH, WIDTH)


def _ints(generator: np.random.PCG64, size: int, shift: int, offset: int) -> Floats:
    words = generator.random_raw((size + 1) // 2).astype("<u8", copy=False).view("<u4")[:size]
    out: Floats = (words >> shift).astype(np.float32)
    out -= np.float32(offset)
    return out


def chain(x0: Floats, b: Floats, steps: int) -> Ints:
    """X after `steps` steps, X <- (floor(X @ B / 4) mod 8192) - 4096, in float32 on the CPU (exact:
    see `protocol.challenge`), as int16. The wrap is a mask of the int32 value (two's complement:
    the floored modulo of a power of two), four passes over X a step besides the product."""
    x = x0.copy()
    out = np.empty_like(x)
    ints = np.empty(x.shape, dtype=np.int32)
    for _ in range(steps):
        np.matmul(x, b, out=out)
        out *= np.float32(0.25)
        np.floor(out, out=out)
        np.copyto(ints, out, casting="unsafe")
        ints &= WRAP - 1
        np.subtract(ints, HALF, out=x, casting="unsafe")
    rows: Ints = x.astype(np.int16)
    return rows


_ONE_BLAS: Final = threading.Lock()


def exact_rows(seed: int, n: int, steps: int, rows: Sequence[int]) -> list[bytes]:
    """The named rows of the chain in float64, as int16 bytes (the submitter's check: steps x
    len(rows) x WIDTH**2 multiply-adds, after expanding the seed), on one BLAS thread: 16 rows are
    too few for a second to help, and on a busy 2-core machine OpenBLAS's two threads took 0.05-0.42 s
    for a 46-step round's rows against 0.02-0.05 s on one (a challenge's verdict waits for them).
    One recomputation at a time (the limit is the process's)."""
    from threadpoolctl import threadpool_limits

    with _ONE_BLAS, threadpool_limits(limits=1, user_api="blas"):
        return _exact_rows(seed, n, steps, rows)


def _exact_rows(seed: int, n: int, steps: int, rows: Sequence[int]) -> list[bytes]:
    x0, b = expand(seed, n)
    x = x0[list(rows)].astype(np.float64)
    weights = b.astype(np.float64)
    for _ in range(steps):
        x = np.mod(np.floor(x @ weights / 4.0), WRAP) - HALF
    return [np.ascontiguousarray(row, dtype="<i2").tobytes() for row in x.astype(np.int16)]


def digests(c: npt.NDArray[Any]) -> bytes:
    """Every row's digest (blake2b, `DIGEST_BYTES`, over its little-endian bytes in its own type:
    the chain's int16), in order."""
    rows = np.ascontiguousarray(c, dtype=c.dtype.newbyteorder("<"))
    return b"".join(hashlib.blake2b(row.tobytes(), digest_size=DIGEST_BYTES).digest() for row in rows)


def row_bytes(c: npt.NDArray[Any], rows: Sequence[int]) -> list[bytes]:
    """The named rows as the worker reveals them (little-endian, in the result's own type)."""
    return [np.ascontiguousarray(c[r], dtype=c.dtype.newbyteorder("<")).tobytes() for r in rows]


def answer(
    conn: Connection,
    start: Callable[[], None],
    work: Callable[[tuple[Any, ...]], npt.NDArray[Any] | None],
    warm: Callable[[], None] = lambda: None,
) -> None:
    """A challenge child's whole life on `conn` (the CPU's and the GPU's): `start` (imports,
    warm-up), `ready`; then each ("warm",) forgets the last result and runs `warm` (a challenge's
    beginning), answered ("warmed",); each request `work` computes (None: not one of its own, the
    challenge is over) is answered ("commit", its row digests), each ("reveal", rows) with the last
    result's rows. Ends when the parent closes the pipe; never raises: a failure is a ("failed", why)."""
    c: npt.NDArray[Any] | None = None
    try:
        start()
        conn.send(("ready",))
        while True:
            asked: tuple[Any, ...] = conn.recv()
            if asked[0] == "reveal" and c is not None:
                conn.send(("rows", row_bytes(c, [int(r) for r in asked[1] if 0 <= int(r) < len(c)])))
                continue
            if asked[0] == "warm":
                c = None  # the last challenge's rows are never revealed to the next
                warm()
                conn.send(("warmed",))
                continue
            c = None  # the last round's result freed before this one's
            c = work(asked)
            if c is None:
                return
            conn.send(("commit", digests(c)))
    except EOFError:
        return  # the parent closed the pipe: the challenge is over
    except Exception as exc:  # the child's boundary: the parent gets the reason, never a traceback
        conn.send(("failed", f"{type(exc).__name__}: {str(exc)[:200]}"))
    finally:
        conn.close()


def chain_asked(asked: tuple[Any, ...]) -> tuple[int, int, int] | None:
    """("chain", n, steps, seed)'s n, steps and seed, within the protocol's bounds; None otherwise."""
    if asked[0] == "chain" and 0 < int(asked[1]) <= MAX_N and 0 < int(asked[2]) <= MAX_STEPS:
        return int(asked[1]), int(asked[2]), int(asked[3])
    return None


TRIAL_STEPS: Final = 1
"""The steps of each trial chain `Kernel.warm` times (512 rows: 2-3 ms on a quiet core)."""
LOST: Final = 2.0
"""An all-threads trial this many times slower than the best one-thread trial is not tried again: the
spawn gone (the child waits ready), the trial was most of a challenge's start on a busy machine
(0.26-0.48 s of 0.9 s a peer, OpenBLAS's 2 threads then running a 2-step chain at a few GFLOPS)."""
TRIALS: Final = 2
"""Trials of each thread count, alternating; the fastest of each counts (a challenge waits for them:
4 steps, about 15 ms on a quiet core)."""


class Kernel:
    """The CPU chain run as fast as this machine runs it now: on one BLAS thread or on all of them.

    A BLAS that splits a 512 x 512 product over every core waits at each block for its slowest
    thread: with one core busy in another process, numpy's OpenBLAS on 2 threads ran the product
    1.5-6x slower than on one (34-82 GFLOPS against 124-126, a 2-core machine at load 1.7). The
    child times a short chain both ways at each challenge's start and keeps the faster. The choice only
    makes the honest device as fast as it can be now; the bound the submitter judges it by does not
    move (a liar gains nothing: its speed is its hardware's whichever way it computes).
    """

    def __init__(self) -> None:
        self.threads: int | None = None
        """The BLAS threads the chain runs on (None: the library's own count, usually every core)."""
        self._pools: Any = None
        """threadpoolctl's controller, made once in `warm` (it finds the loaded BLAS libraries): a
        round's timed window only sets the limit."""

    def load(self) -> None:
        """Start the BLAS threads (a one-step chain) and find the BLAS libraries: the child's start,
        before any challenge is asked."""
        from threadpoolctl import ThreadpoolController

        x0, b = expand(0, WIDTH)
        chain(x0, b, 1)  # BLAS threads started before any seed arrives
        self._pools = ThreadpoolController()

    def warm(self) -> None:
        """Keep the faster of one BLAS thread and all of them, timed now (a challenge's beginning:
        the machine's load when the child started says nothing of the load now)."""
        if self._pools is None:
            self.load()
        x0, b = expand(0, WIDTH)
        best: dict[int | None, float] = {}
        for _ in range(TRIALS):
            for threads in (1, None):
                if threads is None and best.get(None, 0.0) > LOST * best[1]:
                    continue  # all threads lost by far: on a busy machine each such trial takes 0.1-0.2 s
                with self._pools.limit(limits=threads, user_api="blas"):
                    start = time.perf_counter()
                    chain(x0, b, TRIAL_STEPS)
                    took = time.perf_counter() - start
                best[threads] = min(best.get(threads, took), took)
        self.threads = 1 if best[1] <= best[None] else None

    def chained(self, asked: tuple[Any, ...]) -> Ints | None:
        """("chain", n, steps, seed)'s rows, or None for any other request."""
        named = chain_asked(asked)
        if named is None:
            return None
        if self._pools is None:  # not warmed: the library's own thread count
            return chain(*expand(named[2], named[0]), named[1])
        with self._pools.limit(limits=self.threads, user_api="blas"):
            return chain(*expand(named[2], named[0]), named[1])


def main(conn: Connection) -> None:
    """The child's entry (see the module docstring); never raises: a failure is a ("failed", why)."""
    kernel = Kernel()
    answer(conn, kernel.load, kernel.chained, kernel.warm)


__all__ = ["Kernel", "answer", "chain", "chain_asked", "digests", "exact_rows", "expand", "main", "row_bytes"]
