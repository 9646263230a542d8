"""A challenge: the device measured by work it cannot skip or precompute, against its claimed speed.

`claims` believes a calibration unless physics or its class refutes it, and a unique claim is a
class of one. A challenge measures the device itself (`protocol.challenge` has the frames): the
submitter draws a seed from its campaign's secret (`DrawKey`, `Purpose.CHALLENGE_SEED`), sized so
the claimed `cpu_gflops` multiplies two n x n float32 matrices in about `TARGET_S`; the worker
expands the seed, computes C = A @ B and commits to a digest of every row before it learns which
rows are checked (`Purpose.CHALLENGE_ROWS`, drawn by the submitter, named only after the
commitment arrived). A worker that computed a fraction f of the rows passes the reveal with
probability about f ** `ROWS_CHECKED`.

Time bounds the claim. The submitter times seed-sent to commitment-received on its own clock and
subtracts the fastest ping it measured on the same stream just before; a worker can only be slower
than its hardware, never faster, so 2 n**3 over that time is what the worker showed it can do. A
worker could delay its pongs to be credited a longer round trip, so the credit is at most the
claim's time over `RTT_SHARE` (and the kernel is sized to at least `RTT_SHARE` round trips): a
claim up to `SLACK` + 1 / `RTT_SHARE` times the truth can pass whatever the worker does with its
pongs, and no more. The fastest of up to `CHALLENGE_ROUNDS` rounds counts (as the calibration keeps
its best repeat): one disturbed round does not refuse an honest device. Under `1 / SLACK` of the
claim, the peer is `claim_unverified` with the figures named.

`SLACK` covers an honest device's spread between its calibration (the best repeat of a 512 x 512
product, cache-resident) and one shot of a larger product with the matrices generated and every row
hashed inside the timed window, on a machine that other tenants load: measured here (2 cores,
load average 4) at 0.3-2x; `benchmarks/challenge_noise.py` prints it.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol import CHALLENGE_MAX_N, CHALLENGE_MIN_N, DIGEST_BYTES
from scheduler.verification.draws import DrawKey, Purpose

TARGET_S: Final = 0.15
"""How long the claimed speed takes for one round's product (at least)."""
RTT_SHARE: Final = 4.0
"""The kernel lasts at least this many round trips at the claimed speed; the credited round trip
is at most the claim's time over it."""
SLACK: Final = 3.0
"""How far below its claim (a factor) a device's best round may measure and still pass."""
ROWS_CHECKED: Final = 16
ROW_TOLERANCE: Final = 1e-5
"""Largest error of a checked element, times sqrt(n): float32 products of uniform [-1, 1) inputs
err about 5e-7 sqrt(n) against float64; a product of float16 or bfloat16 inputs, 3e-4 sqrt(n)."""


@dataclass(frozen=True)
class Sizing:
    """One round's product, sized for the claim.

    Attributes:
        n: the matrices' side.
        claim_s: what the claimed GFLOPS take for 2 n**3 operations.
        credit_s: the round trip subtracted from the elapsed time (the fastest ping, capped).
        deadline_s: the wait for the commitment after which the claim is refused without one.
    """

    n: int
    claim_s: float
    credit_s: float
    deadline_s: float


def size(claimed_gflops: float, rtt_s: float) -> Sizing:
    """The product a claim of `claimed_gflops` is challenged with, over a measured round trip."""
    target = max(TARGET_S, RTT_SHARE * rtt_s)
    n = round((target * claimed_gflops * 1e9 / 2) ** (1 / 3))
    n = min(max(n, CHALLENGE_MIN_N), CHALLENGE_MAX_N)
    claim_s = 2 * n**3 / (claimed_gflops * 1e9)
    credit = min(rtt_s, claim_s / RTT_SHARE)
    return Sizing(n=n, claim_s=claim_s, credit_s=credit, deadline_s=SLACK * claim_s + rtt_s + 1.0)


def gflops(n: int, elapsed_s: float, credit_s: float) -> float:
    """What a product of side n committed `elapsed_s` after its seed shows, less the credited trip."""
    return 2 * n**3 / max(elapsed_s - credit_s, 1e-9) / 1e9


def passes(measured_gflops: float, claimed_gflops: float) -> bool:
    """Whether a measured figure bears out a claim (within `SLACK`)."""
    return measured_gflops * SLACK >= claimed_gflops


def seed_of(key: DrawKey, subject: str) -> int:
    """A round's seed (53 bits), drawn from the campaign's secret for `subject` (peer, try, round)."""
    return int(key.draw(Purpose.CHALLENGE_SEED, subject) * 2**53)


def rows_of(key: DrawKey, subject: str, n: int, k: int = ROWS_CHECKED) -> tuple[int, ...]:
    """`k` distinct rows of n (all of them when n <= k), drawn from the secret for `subject`."""
    if n <= k:
        return tuple(range(n))
    picked: list[int] = []
    draw = 0
    while len(picked) < k:
        row = int(key.draw(Purpose.CHALLENGE_ROWS, f"{subject}\x00{draw}") * n)
        draw += 1
        if row not in picked:
            picked.append(row)
    return tuple(picked)


def row_digest(row: bytes) -> bytes:
    """A row's digest as the worker commits it (`DIGEST_BYTES` of blake2b)."""
    return hashlib.blake2b(row, digest_size=DIGEST_BYTES).digest()


def commit_problem(digests: bytes, n: int) -> str:
    """Why a commitment is not one digest per row of an n x n product ("" when it is)."""
    if len(digests) != n * DIGEST_BYTES:
        return f"its commitment holds {len(digests)} bytes, not {n} digests of {DIGEST_BYTES}"
    return ""


def rows_problem(
    n: int, named: Sequence[int], revealed: Sequence[bytes], digests: bytes, exact: Sequence[Sequence[float]]
) -> str:
    """Why the revealed rows do not stand ("" when they do).

    Args:
        n: the product's side.
        named: the rows the submitter named, in order.
        revealed: the worker's rows, in the same order (n float32 little-endian each).
        digests: the worker's commitment (checked by `commit_problem` first).
        exact: the same rows computed by the submitter in float64.
    """
    if len(revealed) != len(named):
        return f"{len(revealed)} rows revealed for {len(named)} named"
    bound = ROW_TOLERANCE * math.sqrt(n)
    for row, data, truth in zip(named, revealed, exact, strict=True):
        if len(data) != 4 * n:
            return f"row {row} revealed as {len(data)} bytes, not {4 * n}"
        if row_digest(data) != digests[row * DIGEST_BYTES : (row + 1) * DIGEST_BYTES]:
            return f"row {row} does not match the digest committed for it"
        values = struct.unpack(f"<{n}f", data)
        error = max((abs(v - t) for v, t in zip(values, truth, strict=True)), default=0.0)
        if not math.isfinite(error) or error > bound:
            return f"row {row} differs from its float64 product by {error:.3g} (at most {bound:.3g})"
    return ""


def reason(n: int, measured_gflops: float, claimed_gflops: float) -> str:
    """The claim_unverified reason of a device too slow for its claim, with the challenge's figures."""
    return (
        f"challenge: n={n}, {measured_gflops:.3g} GFLOPS measured against {claimed_gflops:.3g} claimed "
        f"(at least 1/{SLACK:g} of the claim needed)"
    )


__all__ = [
    "ROWS_CHECKED",
    "SLACK",
    "Sizing",
    "commit_problem",
    "gflops",
    "passes",
    "reason",
    "row_digest",
    "rows_of",
    "rows_problem",
    "seed_of",
    "size",
]
