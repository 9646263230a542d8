"""A challenge: the device measured by work it cannot skip or precompute, against its claimed speed.

`claims` believes a calibration unless physics or its class refutes it, and a unique claim is a
class of one. A challenge measures the device itself (`protocol.challenge` has the frames and the
chain): the submitter draws a seed from its campaign's secret (`DrawKey`, `Purpose.CHALLENGE_SEED`)
and sizes the chain so the claimed speed computes it in about `TARGET_S`: on the CPU, X of
`CPU_CHAIN_N` (512) rows, each step the calibration's own 512 x 512 product in float32 (so a device
meets its calibration's speed, cache for cache), the claim setting the steps (`size`); on a GPU, up
to `CHAIN_MAX_N` rows, then steps (`size_chain`). The worker expands the seed, computes the chain
and commits to a digest of every row before it learns which rows are checked
(`Purpose.CHALLENGE_ROWS`, drawn by the submitter, named only after the commitment arrived). A
worker that computed a fraction f of the rows passes the reveal with probability about
f ** `ROWS_CHECKED`, and the rows are exact integers: a revealed row must equal the submitter's
recomputation bit for bit (`rows_problem`).

Time bounds the claim. The submitter times seed-sent to commitment-received on its own clock and
subtracts the fastest ping it measured on the same stream just before; a worker can only be slower
than its hardware, never faster, so 2 n 512**2 x steps over that time is what the worker showed it
can do. A worker could delay its pongs to be credited a longer round trip, so the credit is at most
the claim's time over `RTT_SHARE` (and the kernel is sized to at least `RTT_SHARE` round trips). The
fastest of up to `CHALLENGE_ROUNDS` rounds counts (as the calibration keeps its best repeat): one
disturbed round does not refuse an honest device. Under `1 / SLACK` of the claim, the peer is
`claim_unverified` with the figures named.

Where the line sits, as the cheater sees it. A liar chooses its claim and its timing (it can delay a
commitment, never hasten it); it sees the seed, the sizing and its own speed. An honest device's best
round lands at `HONEST_RATIO` of its calibration (a systematic ratio: the seed expanded and the rows
hashed inside the timed window, four passes over X a step; measured by the submitter's side of the
chain, `benchmarks/challenge_noise.py`, never reported by a worker), and a claim `LIAR_FACTOR` times
what the device does lands at most at `HONEST_RATIO / LIAR_FACTOR` of its claim, whatever the liar
does. The line is their geometric midpoint (`SLACK`: `sqrt(LIAR_FACTOR) / HONEST_RATIO`, 1.82), so
both margins are one factor, `sqrt(LIAR_FACTOR)` (1.58): an honest device fails only at under 63 % of
its calibrated speed, and a 2.5x liar passes only on a device 1.58x faster than it can be (its best
round can only be slower than its device). The old line (1/2.5 of the claim) held a 2.5x liar by 13 %,
less than this 2-core machine's speed moves between a calibration and a challenge. The bound reads
nothing the worker reports about its load or its device: a device starved by other work (a fifth of
a core: 0.2 of its calibration, `benchmarks/notes/challenge_noise.md`) looks, in any one challenge,
exactly as slow as a 5x liar, so it is refused for now and challenged again later in the campaign
(`node.submitter.challenge.RECHALLENGE_S`), never credited for the load it says it has.

A CPU that claims a GPU's or a faster CPU's speed computes the right rows, too slowly.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol import (
    CHAIN_MAX_N,
    CHAIN_MAX_STEPS,
    CHALLENGE_MIN_N,
    CHALLENGE_WIDTH,
    CPU_CHAIN_N,
    DIGEST_BYTES,
    ComputeUnit,
    DeviceProfile,
)
from scheduler.verification.draws import DrawKey, Purpose

TARGET_S: Final = 0.15
"""How long the claimed speed takes for one round's product (at least)."""
RTT_SHARE: Final = 4.0
"""The kernel lasts at least this many round trips at the claimed speed; the credited round trip
is at most the claim's time over it."""
HONEST_RATIO: Final = 0.87
"""An honest device's best round over its calibration, quiet (`benchmarks/challenge_noise.py`: 0.86-0.89
on this 2-core machine, the chain's expansion, passes over X and hashing timed with its product)."""
LIAR_FACTOR: Final = 2.5
"""A claim this many times what the device can do is refused (issue 49), whatever the liar does."""
SLACK: Final = math.sqrt(LIAR_FACTOR) / HONEST_RATIO
"""How far below its claim (a factor, 1.82) a device's best round may measure and still pass: the
geometric midpoint of the honest ratio and the `LIAR_FACTOR` liar's, so that each side has the same
margin, `sqrt(LIAR_FACTOR)` (the module docstring)."""
GPU_SLACK: Final = 2.5
"""The line of a GPU's chain (its rounds sized in steps of up to `CHAIN_MAX_N` rows), not moved to the
CPU's midpoint: on a lent H200 an honest round showed 0.53 of its claim (the claim timed on the kernel
alone, a round also pays its launches, the copy of the rows out and their hashing) and a 3x liar,
whose larger round runs closer to the device's speed, 0.27 of its own (benchmarks/notes/gpu_run.md).
The CPU's line (1/`SLACK`, 0.55 of the claim) would refuse that honest round; 1/2.5 (0.4) passes it
by 1.32x and holds the 3x liar by 1.46x. Measured on one lease: rerun `gpu_challenge.py` when a GPU
is lent."""
ROWS_CHECKED: Final = 16
_FLOPS_PER_ROW: Final = 2 * CHALLENGE_WIDTH**2


@dataclass(frozen=True)
class Sizing:
    """One round's product, sized for the claim.

    Attributes:
        n: the rows of X (and of the result).
        steps: the chain's steps.
        claim_s: what the claimed GFLOPS take for the product's 2 n 512**2 operations.
        credit_s: the round trip subtracted from the elapsed time (the fastest ping, capped).
        deadline_s: the wait for the commitment after which the claim is refused without one.
    """

    n: int
    claim_s: float
    credit_s: float
    deadline_s: float
    steps: int = 1


def size(claimed_gflops: float, rtt_s: float) -> Sizing:
    """The chain a CPU claim of `claimed_gflops` is challenged with, over a measured round trip:
    `CPU_CHAIN_N` rows (fewer for a claim too small for one step of them), as many steps as it takes."""
    return size_chain(claimed_gflops, rtt_s, most_rows=CPU_CHAIN_N)


def size_chain(claimed_gflops: float, rtt_s: float, *, most_rows: int = CHAIN_MAX_N) -> Sizing:
    """The chain a claim of `claimed_gflops` is challenged with: as many rows as it takes up to
    `most_rows` (a GPU's: `CHAIN_MAX_N`), then as many steps (up to `CHAIN_MAX_STEPS`: a claim past
    117 TFLOPS on a GPU, or 3.7 on a CPU, gets a shorter kernel, its time bound looser by as much)."""
    rows_steps = max(TARGET_S, RTT_SHARE * rtt_s) * claimed_gflops * 1e9 / _FLOPS_PER_ROW
    n = min(max(round(rows_steps), CHALLENGE_MIN_N), most_rows)
    steps = min(max(round(rows_steps / n), 1), CHAIN_MAX_STEPS)
    return _sized(n, steps, claimed_gflops, rtt_s)


def _sized(n: int, steps: int, claimed_gflops: float, rtt_s: float) -> Sizing:
    claim_s = n * steps * _FLOPS_PER_ROW / (claimed_gflops * 1e9)
    credit = min(rtt_s, claim_s / RTT_SHARE)
    deadline = SLACK * claim_s + rtt_s + 1.0
    return Sizing(n=n, claim_s=claim_s, credit_s=credit, deadline_s=deadline, steps=steps)


WORKER_ROUND_S: Final = 4.0
"""The most a worker computes for one round of the CPU chain, at its own claimed speed: the chain a
submitter sizes for that claim over a round trip of up to 1 s (`RTT_SHARE` of them) fits; a stranger
asking more is refused before the child starts on it."""


def cpu_round_problem(n: int, steps: int, claimed_gflops: float | None) -> str:
    """Why a worker refuses a CPU round of n rows and `steps` steps ("" when it computes it): more rows
    than the CPU chain has (`CPU_CHAIN_N`), or more work than `WORKER_ROUND_S` of its own claim (a
    worker with no claim bounds the rows only)."""
    if n > CPU_CHAIN_N:
        return f"the CPU chain has at most {CPU_CHAIN_N} rows, not {n}"
    return _past_claim(n, steps, claimed_gflops, "claim")


def gpu_round_problem(n: int, steps: int, claimed_gflops: float | None) -> str:
    """Why a worker refuses a GPU round of n rows and `steps` steps ("" when it computes it): more work
    than `WORKER_ROUND_S` of its own claim for that device (the rows are held to `CHAIN_MAX_N` by the
    frame itself, the steps to `CHAIN_MAX_STEPS`). A stranger asking the frame's most, 2,048 steps of
    16,384 rows (17.6 TFLOP), of a GPU that claims 1 TFLOPS (17.6 s of it, three rounds a challenge)
    is refused before the child computes anything; every round an honest submitter sizes for that
    claim over a round trip of up to 1 s fits. A worker with no claim for the device bounds
    nothing more (its challenge is not one a submitter asks)."""
    return _past_claim(n, steps, claimed_gflops, "claim for the device")


def _past_claim(n: int, steps: int, claimed_gflops: float | None, whose: str) -> str:
    """Why `steps` steps of n rows are more than `WORKER_ROUND_S` of a claim ("" when not, or no claim)."""
    if claimed_gflops is None or claimed_gflops <= 0:
        return ""
    most = max(1, math.ceil(WORKER_ROUND_S * claimed_gflops * 1e9 / (n * _FLOPS_PER_ROW)))
    if steps > most:
        return (
            f"{steps} steps of {n} rows is more than {WORKER_ROUND_S:g} s of this worker's {whose} "
            f"({claimed_gflops:.3g} GFLOPS: at most {most})"
        )
    return ""


def gflops(n: int, elapsed_s: float, credit_s: float, steps: int = 1) -> float:
    """What a product of n rows (`steps` times) committed `elapsed_s` after its seed shows, less the
    credited trip."""
    return n * steps * _FLOPS_PER_ROW / max(elapsed_s - credit_s, 1e-9) / 1e9


def passes(measured_gflops: float, claimed_gflops: float, *, gpu: bool = False) -> bool:
    """Whether a measured figure bears out a claim (within `SLACK`, a GPU's chain within `GPU_SLACK`)."""
    return measured_gflops * (GPU_SLACK if gpu else SLACK) >= claimed_gflops


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
    """Why a commitment is not one digest per row of an n-row product ("" when it is)."""
    if len(digests) != n * DIGEST_BYTES:
        return f"its commitment holds {len(digests)} bytes, not {n} digests of {DIGEST_BYTES}"
    return ""


def rows_problem(
    named: Sequence[int], revealed: Sequence[bytes], digests: bytes, exact: Sequence[bytes]
) -> str:
    """Why the revealed rows do not stand ("" when they do): each must match its committed digest and
    equal the submitter's recomputation bit for bit (the chain is exact in float32).

    Args:
        named: the rows the submitter named, in order.
        revealed: the worker's rows, in the same order (`CHALLENGE_WIDTH` int16 little-endian each).
        digests: the worker's commitment (checked by `commit_problem` first).
        exact: the same rows as the submitter computed them (`CHALLENGE_WIDTH` int16 each).
    """
    if len(revealed) != len(named):
        return f"{len(revealed)} rows revealed for {len(named)} named"
    for row, data, truth in zip(named, revealed, exact, strict=True):
        if len(data) != 2 * CHALLENGE_WIDTH:
            return f"row {row} revealed as {len(data)} bytes, not {2 * CHALLENGE_WIDTH}"
        if row_digest(data) != digests[row * DIGEST_BYTES : (row + 1) * DIGEST_BYTES]:
            return f"row {row} does not match the digest committed for it"
        if data != truth:
            values, exactly = (struct.unpack(f"<{CHALLENGE_WIDTH}h", b) for b in (data, truth))
            wrong = sum(v != t for v, t in zip(values, exactly, strict=True))
            return f"row {row} differs from the exact chain in {wrong} of its {CHALLENGE_WIDTH} values"
    return ""


@dataclass(frozen=True)
class Measured:
    """One unit's challenge, as `peers --challenge` shows it.

    Attributes:
        unit: "CPU", or the GPU unit and its device ("GPU (PyTorch) cuda:0").
        claimed_gflops: the claim (a GPU's `gpu_tflops` times 1000).
        measured_gflops: the best round's figure (0 when no round was timed).
        problem: why the claim is refused, or why it went unanswered ("" when borne out).
        answered: False when the worker did not take part (gone, busy, an older version).
        busy: the worker did not take part because it said it was busy (another challenge held its
            one slot) until the challenge's budget ran out: it is there and will be free again.
        under: `measured_gflops` is a bound, not a figure: no commitment came by the deadline.
    """

    unit: str
    claimed_gflops: float
    measured_gflops: float
    problem: str
    answered: bool = True
    busy: bool = False
    under: bool = False


def label(unit: ComputeUnit | None = None, device: str = "") -> str:
    """What a challenge names: "challenge" for the CPU's, "challenge on GPU (PyTorch) cuda:0" for a GPU's."""
    return "challenge" if unit is None else f"challenge on {unit.value} {device}"


def reason(
    n: int, measured_gflops: float, claimed_gflops: float, *, steps: int = 1, named: str = "challenge"
) -> str:
    """The claim_unverified reason of a device too slow for its claim, with the challenge's figures
    (`named`: `label`'s; a CPU's figures in GFLOPS, a GPU's in TFLOPS)."""
    shape = f"n={n}" if steps == 1 else f"n={n} x {steps} steps"
    cpu = named == label()
    scale, unit = (1.0, "GFLOPS") if cpu else (1e3, "TFLOPS")
    slack = SLACK if cpu else GPU_SLACK
    return (
        f"{named}: {shape}, {measured_gflops / scale:.3g} {unit} measured against "
        f"{claimed_gflops / scale:.3g} claimed (at least 1/{slack:.3g} of the claim needed)"
    )


def gpu_claims(profile: DeviceProfile) -> tuple[tuple[str, float], ...]:
    """The profile's GPU claims a challenge tests: each `gpu_tflops` device and its GFLOPS."""
    cal = profile.calibration
    return (
        ()
        if cal is None
        else tuple((device, tflops * 1e3) for device, tflops in sorted(cal.gpu_tflops.items()))
    )


def gpu_unit(profile: DeviceProfile) -> ComputeUnit | None:
    """The unit a GPU claim is challenged through (`GPU (PyTorch)`, when the profile lists it usable)."""
    return ComputeUnit.GPU_TORCH if ComputeUnit.GPU_TORCH in profile.usable_units() else None


def no_gpu_kernel(device: str) -> str:
    """The reason of a GPU claim on a profile that lists no unit the challenge runs through."""
    return (
        f"challenge: gpu_tflops[{device}] unverified: the GPU challenge runs through "
        f"{ComputeUnit.GPU_TORCH.value}, which the profile does not list usable"
    )


__all__ = [
    "GPU_SLACK",
    "HONEST_RATIO",
    "LIAR_FACTOR",
    "ROWS_CHECKED",
    "SLACK",
    "Measured",
    "Sizing",
    "commit_problem",
    "cpu_round_problem",
    "gflops",
    "gpu_claims",
    "gpu_round_problem",
    "gpu_unit",
    "label",
    "no_gpu_kernel",
    "passes",
    "reason",
    "row_digest",
    "rows_of",
    "rows_problem",
    "seed_of",
    "size",
    "size_chain",
]
