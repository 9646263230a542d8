"""`/sark/challenge/1.0.0`: a short matmul the submitter draws, to test a peer's claimed CPU speed.

A peer's calibration (`Calibration.cpu_gflops`) is its own word. A challenge measures it: the
submitter sends a seed it drew from its campaign's secret only now, the worker expands it into two
float32 matrices with the generator below, computes C = A @ B in a spawned child and commits to
every row of C (one digest each) before it learns which rows the submitter will check. The
submitter times seed-sent to commitment-received on its own clock, then names rows it draws after
the commitment arrived; the worker reveals them and the submitter recomputes them in float64.

One stream, in this order (the submitter speaks first each time, the worker answers once):

    challenge_open            -> challenge_ready      (the worker's child is up, numpy loaded)
    then up to CHALLENGE_ROUNDS rounds of:
      challenge_ping x k      -> challenge_pong x k   (the round trip the submitter subtracts)
      challenge_seed(n, seed) -> challenge_commit     (a digest per row of C, concatenated)
      challenge_reveal(rows)  -> challenge_rows       (those rows of C, float32 little-endian)

A worker that cannot take part answers `challenge_failed` with why (busy, its child failed, an n over
`CHALLENGE_MAX_N`).

The generator (both sides run it; `expand` in `drivers/challengechild.py`): numpy's PCG64 seeded
with `seed` (through its SeedSequence); A then B, each n x n in row-major order, each element one
32-bit word of `random_raw`'s 64-bit outputs (the low word first), its top 24 bits k mapped to
k * 2**-23 - 1: uniform on [-1, 1), exact in float32. PCG64's raw stream is stable across numpy
versions (its `Generator` distributions are not promised to be).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from protocol.base import Value

CHALLENGE: Final = "/sark/challenge/1.0.0"
CHALLENGE_MIN_N: Final = 64
CHALLENGE_MAX_N: Final = 4096
"""The largest matrix a worker multiplies: three 64 MiB float32 matrices in its child."""
CHALLENGE_ROUNDS: Final = 3
CHALLENGE_PINGS: Final = 3
"""Ping rounds before each seed (the submitter subtracts the fastest)."""
CHALLENGE_MAX_ROWS: Final = 32
DIGEST_BYTES: Final = 16
"""Each row's digest: blake2b with a 16-byte output over the row's float32 little-endian bytes."""


class ChallengeOpen(Value):
    """The submitter asks the worker to get a challenge child ready (nothing secret yet)."""

    kind: Literal["challenge_open"] = "challenge_open"


class ChallengeReady(Value):
    """The worker's child is running and waits for a seed."""

    kind: Literal["challenge_ready"] = "challenge_ready"


class ChallengePing(Value):
    """A round trip the submitter times (the worker answers at once)."""

    kind: Literal["challenge_ping"] = "challenge_ping"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS * CHALLENGE_PINGS)


class ChallengePong(Value):
    """The answer to a `ChallengePing`, carrying its round."""

    kind: Literal["challenge_pong"] = "challenge_pong"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS * CHALLENGE_PINGS)


class ChallengeSeed(Value):
    """A round's matrices: n and the seed they expand from (drawn by the submitter just now)."""

    kind: Literal["challenge_seed"] = "challenge_seed"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    n: int = Field(ge=CHALLENGE_MIN_N, le=CHALLENGE_MAX_N)
    seed: int = Field(ge=0, lt=2**63)


class ChallengeCommit(Value):
    """The worker's commitment: `DIGEST_BYTES` per row of C, rows in order, concatenated."""

    kind: Literal["challenge_commit"] = "challenge_commit"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    digests: bytes = Field(max_length=CHALLENGE_MAX_N * DIGEST_BYTES)


class ChallengeReveal(Value):
    """The rows of C the submitter checks, drawn after the commitment arrived."""

    kind: Literal["challenge_reveal"] = "challenge_reveal"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    rows: tuple[int, ...] = Field(min_length=1, max_length=CHALLENGE_MAX_ROWS)


class ChallengeRows(Value):
    """The named rows of C, each n float32 values little-endian, in the order they were named."""

    kind: Literal["challenge_rows"] = "challenge_rows"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    rows: tuple[bytes, ...] = Field(max_length=CHALLENGE_MAX_ROWS)


class ChallengeFailed(Value):
    """The worker cannot (or will no longer) take part, and why."""

    kind: Literal["challenge_failed"] = "challenge_failed"
    reason: str = Field(max_length=500)


__all__ = [
    "CHALLENGE",
    "CHALLENGE_MAX_N",
    "CHALLENGE_MAX_ROWS",
    "CHALLENGE_MIN_N",
    "CHALLENGE_PINGS",
    "CHALLENGE_ROUNDS",
    "DIGEST_BYTES",
    "ChallengeCommit",
    "ChallengeFailed",
    "ChallengeOpen",
    "ChallengePing",
    "ChallengePong",
    "ChallengeReady",
    "ChallengeReveal",
    "ChallengeRows",
    "ChallengeSeed",
]
