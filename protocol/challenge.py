"""`/sark/challenge/1.0.0`: a short matmul the submitter draws, to test a peer's claimed CPU speed
(and `1.1.0`, a chain of them, its GPU's).

A peer's calibration (`Calibration.cpu_gflops`) is its own word. A challenge measures it: the
submitter sends a seed it drew from its campaign's secret only now, the worker expands it into
float32 matrices A (n x `CHALLENGE_WIDTH`) and B (`CHALLENGE_WIDTH` square) with the generator below,
computes C = A @ B in a spawned child and commits to every row of C (one digest each) before it
learns which rows the submitter will check. The product is n stacked 512 x 512 products sharing
B: the calibration's own kernel (`drivers/calibrate.py`, 512 x 512), so a device's challenge runs
at the speed its calibration measured, cache for cache, whatever n the claim asks for. The
submitter times seed-sent to commitment-received on its own clock, then names rows it draws after
the commitment arrived; the worker reveals them and the submitter recomputes them in float64.

One stream, in this order (the submitter speaks first each time, the worker answers once):

    challenge_open            -> challenge_ready      (the worker's child is up, numpy loaded)
    then up to CHALLENGE_ROUNDS rounds of:
      challenge_ping x k      -> challenge_pong x k   (the round trip the submitter subtracts)
      challenge_seed(n, seed) -> challenge_commit     (a digest per row of C, concatenated)
      challenge_reveal(rows)  -> challenge_rows       (those rows of C, float32 little-endian)

A worker that cannot take part answers `challenge_failed` with why (busy, its child failed).

The generator (both sides run it; `expand` in `drivers/challengechild.py`): numpy's PCG64 seeded
with `seed` (through its SeedSequence); A then B, in row-major order, each element one
32-bit word of `random_raw`'s 64-bit outputs (the low word first), its top 23 bits k mapped to
k * 2**-23 - 0.5: uniform on [-0.5, 0.5), exact in float32. PCG64's raw stream is stable across numpy
versions (its `Generator` distributions are not promised to be).

`/sark/challenge/1.1.0` tests a GPU claim (`Calibration.gpu_tflops[device]`) with a kernel a GPU
cannot finish in the wait its claim allows by shrinking the product's inputs: the chain. The 1.0.0
product's inputs are as many bytes as its work over 512, so at a GPU's speed expanding them and
hashing C would be most of the round; the chain reuses them `steps` times. Opened with
`challenge_unit_open(unit, device)`, seeded with `challenge_chain_seed(n, steps, seed)`, the rest as
above (`drivers/chainchild.py` computes it):

    X0 (n x 512) integers in [-4096, 4096): each 32-bit word's top 13 bits less 4096
    B (512 x 512) integers in [-8, 8): each word's top 4 bits less 8 (the same PCG64 words, after X0's)
    X(t+1) = (floor(X(t) @ B / 4) mod 8192) - 4096, steps times; C = X(steps) as int16 rows (1024 bytes)

Every sum is an integer under 2**24 in magnitude (512 x 4096 x 8), so float32 computes it exactly in
any accumulation order: the worker's rows are bit-for-bit the submitter's float64 recomputation, and
no float tolerance is needed. X's entries up to 4096 in magnitude need 12 significant bits, more
than TF32's or float16's 11 or bfloat16's 8: a product in a lower precision computes wrong rows.
The floor drops two low bits with their carries and the wrap keeps 13, so a step is linear over no
ring the product lives in: we know no way to fold the steps into one matrix power. The inputs
(2 n KiB + 1 MiB in float32) are expanded on the CPU from the same seed on both sides.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, TypeAlias

from pydantic import Field

from protocol.base import Value
from protocol.units import ComputeUnit
from protocol.values import ProfileName

CHALLENGE: Final = "/sark/challenge/1.0.0"
CHALLENGE_UNITS: Final = "/sark/challenge/1.1.0"
"""The same frames, opened with `challenge_unit_open` and seeded with `challenge_chain_seed`: the
chain kernel on a named device (a GPU); a worker of 1.0.0 does not speak it, and says so by
refusing the protocol."""
CHALLENGE_WIDTH: Final = 512
"""The columns of A, and B's side (the calibration's matrix size)."""
CHALLENGE_MIN_N: Final = 64
CHALLENGE_MAX_N: Final = 65536
"""The most rows of A (and C) a worker multiplies: 128 MiB each in its child, 34 GFLOP."""
CHALLENGE_ROUNDS: Final = 3
CHALLENGE_PINGS: Final = 3
"""Ping rounds before each seed (the submitter subtracts the fastest)."""
CHALLENGE_MAX_ROWS: Final = 32
DIGEST_BYTES: Final = 16
CHAIN_MAX_N: Final = 16384
"""The most rows of the chain kernel's X (its work grows with its steps, not its rows)."""
CHAIN_MAX_STEPS: Final = 2048
"""The most steps of the chain: 2048 x 16384 rows is 17.6 TFLOP, 0.15 s at 117 TFLOPS."""
"""Each row's digest: blake2b with a 16-byte output over the row's float32 little-endian bytes."""


class ChallengeOpen(Value):
    """The submitter asks the worker to get a challenge child ready (nothing secret yet)."""

    kind: Literal["challenge_open"] = "challenge_open"


class ChallengeUnitOpen(Value):
    """`/sark/challenge/1.1.0`'s first frame: a child ready for the chain kernel on `device` of `unit`.

    Attributes:
        unit: the claimed unit the kernel runs through (`GPU (PyTorch)` is the one a worker serves).
        device: the key of the claim in `Calibration.gpu_tflops` (a torch device name, `cuda:0`).
    """

    kind: Literal["challenge_unit_open"] = "challenge_unit_open"
    unit: ComputeUnit
    device: ProfileName


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
    """A round's matrices: A's rows n and the seed they expand from (drawn by the submitter just now)."""

    kind: Literal["challenge_seed"] = "challenge_seed"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    n: int = Field(ge=CHALLENGE_MIN_N, le=CHALLENGE_MAX_N)
    seed: int = Field(ge=0, lt=2**63)


class ChallengeChainSeed(Value):
    """A round of the chain kernel: X's rows n, the steps, and the seed X and B expand from."""

    kind: Literal["challenge_chain_seed"] = "challenge_chain_seed"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    n: int = Field(ge=CHALLENGE_MIN_N, le=CHAIN_MAX_N)
    steps: int = Field(ge=1, le=CHAIN_MAX_STEPS)
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
    rows: tuple[Annotated[int, Field(ge=0, lt=CHALLENGE_MAX_N)], ...] = Field(
        min_length=1, max_length=CHALLENGE_MAX_ROWS
    )


class ChallengeRows(Value):
    """The named rows of C, each `CHALLENGE_WIDTH` float32 values little-endian, as they were named."""

    kind: Literal["challenge_rows"] = "challenge_rows"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    rows: tuple[Annotated[bytes, Field(max_length=4 * CHALLENGE_WIDTH)], ...] = Field(
        max_length=CHALLENGE_MAX_ROWS
    )


class ChallengeFailed(Value):
    """The worker cannot (or will no longer) take part, and why."""

    kind: Literal["challenge_failed"] = "challenge_failed"
    reason: str = Field(max_length=500)


ChallengeFrame: TypeAlias = (
    ChallengeOpen
    | ChallengeUnitOpen
    | ChallengeReady
    | ChallengePing
    | ChallengePong
    | ChallengeSeed
    | ChallengeChainSeed
    | ChallengeCommit
    | ChallengeReveal
    | ChallengeRows
    | ChallengeFailed
)
"""Every frame of `/sark/challenge/1.0.0` and `1.1.0`: the members `messages.Message` takes from them."""


__all__ = [
    "CHAIN_MAX_N",
    "CHAIN_MAX_STEPS",
    "CHALLENGE",
    "CHALLENGE_MAX_N",
    "CHALLENGE_MAX_ROWS",
    "CHALLENGE_MIN_N",
    "CHALLENGE_PINGS",
    "CHALLENGE_ROUNDS",
    "CHALLENGE_UNITS",
    "CHALLENGE_WIDTH",
    "DIGEST_BYTES",
    "ChallengeChainSeed",
    "ChallengeCommit",
    "ChallengeFailed",
    "ChallengeFrame",
    "ChallengeOpen",
    "ChallengePing",
    "ChallengePong",
    "ChallengeReady",
    "ChallengeReveal",
    "ChallengeRows",
    "ChallengeSeed",
    "ChallengeUnitOpen",
]
