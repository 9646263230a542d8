"""`/sark/challenge/1.2.0`: a short chain of products the submitter draws, to test a peer's claimed CPU
speed (and `1.1.0`, the same chain on a named device, its GPU's).

A peer's calibration (`Calibration.cpu_gflops`) is its own word. A challenge measures it: the
submitter sends a seed it drew from its campaign's secret only now, the worker expands it into X0
(n x `CHALLENGE_WIDTH`) and B (`CHALLENGE_WIDTH` square) with the generator below, computes the
chain in a spawned child and commits to every row of its result (one digest each) before it learns
which rows the submitter will check. On the CPU, n is 512 (`CPU_CHAIN_N`): each step is the
calibration's own 512 x 512 product (`drivers/measuring/calibrate.py`), cache for cache, so a device's
challenge runs at the speed its calibration measured, and the claim sets the steps. The submitter
times seed-sent to commitment-received on its own clock, then names rows it draws after the
commitment arrived; the worker reveals them and the submitter recomputes them in float64.

One stream, in this order (the submitter speaks first each time, the worker answers once):

    challenge_open            -> challenge_ready      (the worker's child is up, numpy loaded)
    then up to CHALLENGE_ROUNDS rounds of:
      challenge_ping x k      -> challenge_pong x k   (the round trip the submitter subtracts)
      challenge_chain_seed(n, steps, seed) -> challenge_commit  (a digest per row, concatenated)
      challenge_reveal(rows)  -> challenge_rows       (those rows, int16 little-endian)

A worker that cannot take part answers `challenge_failed` with why (busy, its child failed).

The chain (`drivers/measuring/challengechild.py`: `expand`, `chain`, `exact_rows`):

    PCG64 seeded with `seed` (numpy's, through its SeedSequence; its raw stream is stable across
    numpy versions, its `Generator` distributions are not promised to be), each element one 32-bit
    word of `random_raw`'s 64-bit outputs, the low word first, in row-major order:
    X0 (n x 512) integers in [-4096, 4096): each word's top 13 bits less 4096
    B (512 x 512) integers in [-8, 8): each word's top 4 bits less 8 (the words after X0's)
    X(t+1) = (floor(X(t) @ B / 4) mod 8192) - 4096, steps times; the result X(steps) as int16 rows

Every sum is an integer under 2**24 in magnitude (512 x 4096 x 8), so float32 computes it exactly in
any accumulation order: the worker's rows are bit-for-bit the submitter's float64 recomputation, and
no float tolerance is needed. X's entries up to 4096 in magnitude need 12 significant bits, more
than TF32's or float16's 11 or bfloat16's 8: a product in a lower precision computes wrong rows.
The floor drops two low bits with their carries and the wrap keeps 13, so a step is linear over no
ring the product lives in: we know no way to fold the steps into one matrix power. The inputs
(2 n KiB + 1 MiB in float32) are expanded from the same seed on both sides.

`/sark/challenge/1.1.0` tests a GPU claim (`Calibration.gpu_tflops[device]`): opened with
`challenge_unit_open(unit, device)`, the same rounds, up to `CHAIN_MAX_N` rows on the named device
(`drivers/measuring/chainchild.py`, through torch).

`/sark/challenge/1.0.0` (retired) multiplied one n x 512 matrix by B: its inputs and result were as
many bytes as its work over 512, and expanding and hashing them took a CPU with AVX-512 as long as
the product (honest devices measured 0.37 of their calibration, under the time bound's 1/2.5). A
worker no longer serves it, nor a submitter asks it: a verified campaign challenges only workers of
1.2.0 (an older one's claim stays `claim_unverified`, with why).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, TypeAlias

from pydantic import Field

from protocol.base import Value
from protocol.units import ComputeUnit
from protocol.values import ProfileName

CHALLENGE: Final = "/sark/challenge/1.2.0"
"""The CPU claim's challenge: `challenge_open`, then the chain on the CPU (`CPU_CHAIN_N` rows)."""
CHALLENGE_UNITS: Final = "/sark/challenge/1.1.0"
"""The same frames, opened with `challenge_unit_open` and seeded with `challenge_chain_seed`: the
chain kernel on a named device (a GPU); a worker of 1.0.0 does not speak it, and says so by
refusing the protocol."""
CHALLENGE_WIDTH: Final = 512
"""The columns of A, and B's side (the calibration's matrix size)."""
CHALLENGE_MIN_N: Final = 64
CPU_CHAIN_N: Final = 512
"""The chain's rows on the CPU: X is the calibration's 512 x 512 matrix (a claim sets the steps)."""
CHALLENGE_ROUNDS: Final = 3
CHALLENGE_PINGS: Final = 3
"""Ping rounds before each seed (the submitter subtracts the fastest)."""
CHALLENGE_BUSY: Final = "busy: another challenge is running"
"""A worker's `challenge_failed` reason while its one challenge slot is taken: the submitter asks
again within its budget (the slot is held only while a round runs)."""
CHALLENGE_PREEMPTED: Final = "busy: preempted by a submitter this worker takes offers from"
"""A stranger's `challenge_failed` reason when a peer on the worker's `--allow` list asks meanwhile:
its challenge is ended (its child stopped) and the allowed peer's runs; asked again like busy."""
CHALLENGE_MAX_ROWS: Final = 32
DIGEST_BYTES: Final = 16
CHAIN_MAX_N: Final = 16384
"""The most rows of the chain kernel's X (its work grows with its steps, not its rows)."""
CHAIN_MAX_STEPS: Final = 2048
"""The most steps of the chain: 2048 x 16384 rows is 17.6 TFLOP, 0.15 s at 117 TFLOPS."""
"""Each row's digest: blake2b with a 16-byte output over the row's int16 little-endian bytes."""


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
    digests: bytes = Field(max_length=CHAIN_MAX_N * DIGEST_BYTES)


class ChallengeReveal(Value):
    """The rows of the result the submitter checks, drawn after the commitment arrived."""

    kind: Literal["challenge_reveal"] = "challenge_reveal"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    rows: tuple[Annotated[int, Field(ge=0, lt=CHAIN_MAX_N)], ...] = Field(
        min_length=1, max_length=CHALLENGE_MAX_ROWS
    )


class ChallengeRows(Value):
    """The named rows of the result, each `CHALLENGE_WIDTH` int16 values little-endian, as named."""

    kind: Literal["challenge_rows"] = "challenge_rows"
    round: int = Field(ge=0, lt=CHALLENGE_ROUNDS)
    rows: tuple[Annotated[bytes, Field(max_length=2 * CHALLENGE_WIDTH)], ...] = Field(
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
    | ChallengeChainSeed
    | ChallengeCommit
    | ChallengeReveal
    | ChallengeRows
    | ChallengeFailed
)
"""Every frame of `/sark/challenge/1.2.0` and `1.1.0`: the members `messages.Message` takes from them."""


__all__ = [
    "CHAIN_MAX_N",
    "CHAIN_MAX_STEPS",
    "CHALLENGE",
    "CHALLENGE_BUSY",
    "CHALLENGE_MAX_ROWS",
    "CHALLENGE_MIN_N",
    "CHALLENGE_PINGS",
    "CHALLENGE_PREEMPTED",
    "CHALLENGE_ROUNDS",
    "CHALLENGE_UNITS",
    "CHALLENGE_WIDTH",
    "CPU_CHAIN_N",
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
    "ChallengeUnitOpen",
]
