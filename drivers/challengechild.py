"""The CPU challenge's kernel: matrices from a seed, their product, a digest per row; and its child.

`protocol.challenge` says what a challenge is and documents the generator; this module is that
generator (`expand`), the worker's kernel (`product`, `digests`) and the submitter's float64 check
of a few rows (`exact_rows`). The worker runs the kernel only in a spawned child (`main`, started by
`node.worker.challenge` with a duplex pipe), never in the daemon, which imports no numpy: the parent
names this module, it never imports it.

The child: imports numpy, warms the BLAS threads with a small product, says `ready`; then for each
`("seed", n, seed)` computes C = A @ B and answers `("commit", digests)`; for `("reveal", rows)`
answers `("rows", [bytes, ...])`; ends on `("end",)` or when the parent closes the pipe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

import numpy as np
import numpy.typing as npt

DIGEST_BYTES: Final = 16  # protocol.challenge.DIGEST_BYTES (the child imports no pydantic)
MAX_N: Final = 65536  # protocol.challenge.CHALLENGE_MAX_N
WIDTH: Final = 512  # protocol.challenge.CHALLENGE_WIDTH

Matrix = npt.NDArray[np.float32]


def expand(seed: int, n: int) -> tuple[Matrix, Matrix]:
    """A (n x WIDTH) and B (WIDTH x WIDTH) for `seed` (`protocol.challenge`'s generator): PCG64, low
    32-bit word first, each word's top 23 bits k as k * 2**-23 - 0.5 (made in place: the bits put
    under a float32 1.0's exponent, then 1.5 taken away; cheap, since the worker's clock runs while
    it expands)."""
    generator = np.random.PCG64(seed)
    return _matrix(generator, n), _matrix(generator, WIDTH)


def _matrix(generator: np.random.PCG64, rows: int) -> Matrix:
    size = rows * WIDTH
    words = generator.random_raw((size + 1) // 2).astype("<u8", copy=False).view("<u4")[:size]
    words >>= 9
    words |= np.uint32(0x3F800000)
    out = words.view("<f4").astype(np.float32, copy=False)
    out -= np.float32(1.5)
    return out.reshape(rows, WIDTH)


def product(seed: int, n: int) -> Matrix:
    """C = A @ B in float32, as the worker computes it."""
    a, b = expand(seed, n)
    c: Matrix = np.matmul(a, b)
    return c


def digests(c: npt.NDArray[Any]) -> bytes:
    """Every row's digest (blake2b, `DIGEST_BYTES`, over its little-endian bytes in its own type:
    float32 here, the chain's int16), in order."""
    rows = np.ascontiguousarray(c, dtype=c.dtype.newbyteorder("<"))
    return b"".join(hashlib.blake2b(row.tobytes(), digest_size=DIGEST_BYTES).digest() for row in rows)


def row_bytes(c: npt.NDArray[Any], rows: Sequence[int]) -> list[bytes]:
    """The named rows as the worker reveals them (little-endian, in the result's own type)."""
    return [np.ascontiguousarray(c[r], dtype=c.dtype.newbyteorder("<")).tobytes() for r in rows]


def exact_rows(seed: int, n: int, rows: Sequence[int]) -> list[list[float]]:
    """The named rows of A @ B computed in float64 (the submitter's check: O(len(rows) WIDTH**2),
    after expanding the seed)."""
    a, b = expand(seed, n)
    exact = a[list(rows)].astype(np.float64) @ b.astype(np.float64)
    return [[float(v) for v in row] for row in exact]


def answer(
    conn: Connection, start: Callable[[], None], work: Callable[[tuple[Any, ...]], npt.NDArray[Any] | None]
) -> None:
    """A challenge child's whole life on `conn` (both kernels'): `start` (imports, warm-up), `ready`;
    then each request `work` computes (None: not one of its own, the challenge is over) is answered
    ("commit", its row digests), each ("reveal", rows) with the last result's rows. Ends when the
    parent closes the pipe; never raises: a failure is a ("failed", why)."""
    c: npt.NDArray[Any] | None = None
    try:
        start()
        conn.send(("ready",))
        while True:
            asked: tuple[Any, ...] = conn.recv()
            if asked[0] == "reveal" and c is not None:
                conn.send(("rows", row_bytes(c, [int(r) for r in asked[1] if 0 <= int(r) < len(c)])))
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


def _warm() -> None:
    warm = np.ones((64, 64), dtype=np.float32)
    np.matmul(warm, warm)  # BLAS threads started before any seed arrives


def _seeded(asked: tuple[Any, ...]) -> Matrix | None:
    """("seed", n, seed)'s product, or None for any other request."""
    return (
        product(int(asked[2]), int(asked[1])) if asked[0] == "seed" and 0 < int(asked[1]) <= MAX_N else None
    )


def main(conn: Connection) -> None:
    """The child's entry (see the module docstring); never raises: a failure is a ("failed", why)."""
    answer(conn, _warm, _seeded)


__all__ = ["answer", "digests", "exact_rows", "expand", "main", "product", "row_bytes"]
