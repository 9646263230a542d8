"""The challenge's draws, commitment, reveal and time bound (`scheduler.verification.challenge`),
against the real kernels the worker's child runs (`drivers.challengechild`; `drivers.chainchild`,
the GPU's, on torch's CPU device), with no network."""

from __future__ import annotations

import math
import struct

import msgpack
import numpy as np
import pytest

from drivers.chainchild import chain, throughput
from drivers.chainchild import digests as chain_digests
from drivers.chainchild import exact_rows as chain_exact
from drivers.chainchild import expand as chain_expand
from drivers.chainchild import row_bytes as chain_row_bytes
from drivers.challengechild import digests, exact_rows, expand, product, row_bytes
from protocol import (
    CHAIN_MAX_N,
    CHAIN_MAX_STEPS,
    CHALLENGE_MAX_N,
    CHALLENGE_MIN_N,
    CHALLENGE_WIDTH,
    DIGEST_BYTES,
    Calibration,
    ChallengeChainSeed,
    ChallengeCommit,
    ChallengeSeed,
    ChallengeUnitOpen,
    ComputeUnit,
    DeviceProfile,
    RemoteProtocolError,
    UnitStatus,
    decode,
    encode,
)
from scheduler.verification import DrawKey, challenge

KEY = DrawKey(bytes(range(32)))
N = 96  # rows of A: small products, the checks (not the speed) are under test


def _honest(seed: int, n: int = N) -> tuple[bytes, list[int], list[bytes], list[list[float]]]:
    """A worker's commitment and the revealed rows for the rows the submitter draws, with the truth."""
    c = product(seed, n)
    rows = list(challenge.rows_of(KEY, f"s{seed}", n))
    return digests(c), rows, row_bytes(c, rows), exact_rows(seed, n, rows)


def test_an_honest_product_stands() -> None:
    committed, rows, revealed, exact = _honest(7)
    assert challenge.commit_problem(committed, N) == ""
    assert len(rows) == challenge.ROWS_CHECKED == len(set(rows))
    assert challenge.rows_problem(N, rows, revealed, committed, exact) == ""


def test_the_generator_is_the_documented_one() -> None:
    """PCG64 raw words, the low 32 bits first, top 23 bits k as k * 2**-23 - 0.5: both sides agree."""
    a, b = expand(11, 4)
    words = np.random.PCG64(11).random_raw(16)
    firsts = [int(words[0]) & 0xFFFFFFFF, int(words[0]) >> 32]
    assert [float(a[0, 0]), float(a[0, 1])] == [(w >> 9) * 2.0**-23 - 0.5 for w in firsts]
    assert a.dtype == np.float32
    assert a.shape == (4, CHALLENGE_WIDTH)
    assert b.shape == (CHALLENGE_WIDTH, CHALLENGE_WIDTH)
    assert a.min() >= -0.5
    assert a.max() < 0.5
    assert not np.array_equal(expand(12, 4)[0], a)


def test_a_tampered_row_with_its_digest_redone_is_refused_by_the_float64_check() -> None:
    committed, rows, revealed, exact = _honest(8)
    values = list(struct.unpack(f"<{CHALLENGE_WIDTH}f", revealed[3]))
    values[5] += 0.01
    forged = struct.pack(f"<{CHALLENGE_WIDTH}f", *values)
    start = rows[3] * DIGEST_BYTES
    recommitted = committed[:start] + challenge.row_digest(forged) + committed[start + DIGEST_BYTES :]
    tampered = [*revealed[:3], forged, *revealed[4:]]
    problem = challenge.rows_problem(N, rows, tampered, recommitted, exact)
    assert problem.startswith(f"row {rows[3]} differs from its float64 product")


def test_a_row_that_does_not_match_its_committed_digest_is_refused() -> None:
    committed, rows, revealed, exact = _honest(9)
    other = row_bytes(product(10, N), rows[:1])[0]  # a true row of another product
    problem = challenge.rows_problem(N, rows, [other, *revealed[1:]], committed, exact)
    assert problem == f"row {rows[0]} does not match the digest committed for it"


@pytest.mark.parametrize(
    ("revealed_rows", "committed_bytes", "why"),
    [
        (15, N * DIGEST_BYTES, "15 rows revealed for 16 named"),
        (16, N * DIGEST_BYTES - 1, f"its commitment holds {N * DIGEST_BYTES - 1} bytes"),
    ],
)
def test_a_short_answer_is_refused(revealed_rows: int, committed_bytes: int, why: str) -> None:
    committed, rows, revealed, exact = _honest(3)
    problem = challenge.commit_problem(committed[:committed_bytes], N) or challenge.rows_problem(
        N, rows, revealed[:revealed_rows], committed, exact
    )
    assert problem.startswith(why)


def test_a_product_of_half_precision_inputs_is_refused() -> None:
    """A worker that multiplies float16 (or bfloat16, TF32) inputs to go faster errs far past float32."""
    n = 64
    a, b = expand(21, n)
    cheap = (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)).astype(
        np.float32
    )
    rows = list(challenge.rows_of(KEY, "half", n))
    problem = challenge.rows_problem(n, rows, row_bytes(cheap, rows), digests(cheap), exact_rows(21, n, rows))
    assert "differs from its float64 product" in problem


def test_a_worker_that_skipped_rows_passes_about_f_to_the_k() -> None:
    """Rows it skipped are committed as zeros (it cannot know which will be named): over 300 drawn
    challenges, computing 90 % of the rows passes about 0.9 ** 16 = 18.5 % of them, 50 % none."""
    n = 64
    c = product(5, n)
    truth = exact_rows(5, n, range(n))
    for fraction, low, high in ((0.9, 0.1, 0.3), (0.5, 0.0, 0.0)):
        done = c.copy()
        done[int(fraction * n) :] = 0.0
        committed = digests(done)
        passed = 0
        for k in range(300):
            rows = challenge.rows_of(DrawKey(bytes([k % 256, k // 256]) * 16), "skip", n)
            revealed = row_bytes(done, rows)
            passed += challenge.rows_problem(n, rows, revealed, committed, [truth[r] for r in rows]) == ""
        assert low <= passed / 300 <= high, (fraction, passed)


def test_seeds_and_rows_come_from_the_key_alone() -> None:
    """A worker that knows the subject (its own id, the try, the round) but not the key cannot draw them."""
    other = DrawKey(bytes(32))
    assert challenge.seed_of(KEY, "peer\x001\x000") == challenge.seed_of(KEY, "peer\x001\x000")
    assert challenge.seed_of(KEY, "peer\x001\x000") != challenge.seed_of(other, "peer\x001\x000")
    assert challenge.seed_of(KEY, "peer\x001\x000") != challenge.seed_of(KEY, "peer\x001\x001")
    assert challenge.rows_of(KEY, "x", 1000) != challenge.rows_of(other, "x", 1000)
    assert 0 <= challenge.seed_of(KEY, "p") < 2**53
    assert challenge.rows_of(KEY, "x", 5) == (0, 1, 2, 3, 4)  # n <= k: every row


@pytest.mark.parametrize("claimed", [0.5, 5.0, 30.0, 300.0, 5000.0])
def test_the_product_is_sized_for_the_claim(claimed: float) -> None:
    sizing = challenge.size(claimed, 0.001)
    assert CHALLENGE_MIN_N <= sizing.n <= CHALLENGE_MAX_N
    if CHALLENGE_MIN_N < sizing.n < CHALLENGE_MAX_N:
        assert sizing.claim_s == pytest.approx(challenge.TARGET_S, rel=0.02)
    assert sizing.credit_s == 0.001
    assert sizing.deadline_s > challenge.SLACK * sizing.claim_s


def test_the_time_bound_refuses_a_4x_claim_and_passes_an_honest_one() -> None:
    claimed = 40.0
    sizing = challenge.size(claimed, 0.002)
    honest = challenge.gflops(sizing.n, sizing.claim_s * 1.5 + 0.002, sizing.credit_s)  # loaded: 1.5x slower
    liar = challenge.gflops(sizing.n, sizing.claim_s * 4 + 0.002, sizing.credit_s)  # its true speed is 1/4
    assert challenge.passes(honest, claimed)
    assert not challenge.passes(liar, claimed)
    assert liar == pytest.approx(claimed / 4, rel=0.01)
    assert challenge.reason(sizing.n, liar, claimed) == (
        f"challenge: n={sizing.n}, {liar:.3g} GFLOPS measured against 40 claimed "
        "(at least 1/2.5 of the claim needed)"
    )


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.1, 0.5, 2.0])
def test_delayed_pongs_buy_a_4x_liar_nothing(delay_s: float) -> None:
    """A worker that holds every pong back is credited a longer trip, but the product grows with
    the trip and the credit is capped at a quarter of the claim's time: a 4x claim still fails."""
    claimed, true_rtt = 40.0, 0.001
    sizing = challenge.size(claimed, true_rtt + delay_s)
    elapsed = 4 * sizing.claim_s + true_rtt  # what the seed-to-commit exchange really takes at 1/4
    measured = challenge.gflops(sizing.n, elapsed, sizing.credit_s)
    assert sizing.credit_s <= sizing.claim_s / challenge.RTT_SHARE
    assert not challenge.passes(measured, claimed)
    assert math.isfinite(measured)


def test_challenge_frames_are_bounded_on_the_wire() -> None:
    seed = ChallengeSeed(round=0, n=1024, seed=2**53 - 1)
    assert decode(encode(seed)) == seed
    commit = ChallengeCommit(round=1, digests=bytes(16 * 1024))
    assert decode(encode(commit)) == commit
    too_big = msgpack.packb({"kind": "challenge_seed", "round": 0, "n": CHALLENGE_MAX_N + 1, "seed": 1})
    with pytest.raises(RemoteProtocolError):
        decode(too_big)


def test_the_chain_on_torchs_cpu_device_is_the_submitters_exact_recomputation() -> None:
    """The GPU kernel's own code (`chainchild.chain`) on torch's `cpu` device: every checked row
    equals the float64 recomputation bit for bit, and the generator is the documented one."""
    n, steps, seed = 96, 5, 31
    x0, b = chain_expand(seed, n)
    words = np.random.PCG64(seed).random_raw(1)
    assert float(x0[0, 0]) == ((int(words[0]) & 0xFFFFFFFF) >> 19) - 4096
    assert (x0.min(), x0.max(), b.min(), b.max()) == (-4096, 4095, -8, 7)
    c = chain(x0, b, steps, "cpu")
    rows = list(challenge.rows_of(KEY, "chain", n))
    committed, revealed = chain_digests(c), chain_row_bytes(c, rows)
    assert challenge.commit_problem(committed, n) == ""
    assert challenge.chain_rows_problem(rows, revealed, committed, chain_exact(seed, n, steps, rows)) == ""
    assert not np.array_equal(chain(x0, b, steps + 1, "cpu"), c)  # every step changes the rows


def test_a_gpu_claim_is_calibrated_on_the_chain_itself() -> None:
    """`throughput` (what the probe records as `gpu_tflops` on a CUDA device) times the very chain a
    challenge runs, here on torch's CPU device, and refuses a device torch cannot run it on."""
    gflops = throughput("cpu", 0.05, n=64, steps=2)
    assert math.isfinite(gflops)
    assert gflops > 0
    with pytest.raises(ValueError, match="sees no CUDA device for cuda:3"):
        throughput("cuda:3", 0.05, n=64, steps=2)


def test_a_chain_in_lower_precision_or_with_a_step_skipped_is_refused() -> None:
    """TF32 keeps 11 significant bits of X's 12: its rows are wrong, not approximately right; a worker
    that skips a step commits rows that are not the chain's either."""
    n, steps, seed = 64, 3, 32
    x0, b = chain_expand(seed, n)
    tf32 = np.where(np.abs(x0) >= 2048, np.round(x0 / 2) * 2, x0)  # 11 significant bits, as TF32 keeps
    rows = list(challenge.rows_of(KEY, "tf32", n))
    exact = chain_exact(seed, n, steps, rows)
    for cheap in (chain(tf32.astype(np.float32), b, steps, "cpu"), chain(x0, b, steps - 1, "cpu")):
        problem = challenge.chain_rows_problem(
            rows, chain_row_bytes(cheap, rows), chain_digests(cheap), exact
        )
        assert "differs from the exact chain in" in problem, problem
    good = chain(x0, b, steps, "cpu")
    forged = [chain_row_bytes(good, rows)[0][:-2] + b"\x00\x00", *chain_row_bytes(good, rows)[1:]]
    problem = challenge.chain_rows_problem(rows, forged, chain_digests(good), exact)
    assert problem == f"row {rows[0]} does not match the digest committed for it"


@pytest.mark.parametrize("tflops", [0.001, 1.0, 20.0, 80.0, 2000.0])
def test_the_chain_is_sized_for_a_gpu_claim(tflops: float) -> None:
    sizing = challenge.size_chain(tflops * 1e3, 0.001)
    assert CHALLENGE_MIN_N <= sizing.n <= CHAIN_MAX_N
    assert 1 <= sizing.steps <= CHAIN_MAX_STEPS
    if sizing.n == CHAIN_MAX_N and sizing.steps < CHAIN_MAX_STEPS:  # a GPU's claim: steps, not rows
        assert sizing.claim_s == pytest.approx(challenge.TARGET_S, rel=0.05)
    assert sizing.deadline_s > challenge.SLACK * sizing.claim_s


def test_a_cpu_claiming_a_gpus_speed_is_refused_and_an_honest_gpu_passes() -> None:
    """A 20 TFLOPS claim answered at a fast CPU's speed (0.5 TFLOPS, the chain's rows right) shows
    about 0.5 TFLOPS, far under 1/2.5 of the claim; a GPU 1.5x slower than its claim passes."""
    claimed = 20e3
    sizing = challenge.size_chain(claimed, 0.002)
    assert (sizing.n, sizing.steps) == (CHAIN_MAX_N, 349)
    cpu_s = sizing.n * sizing.steps * 2 * CHALLENGE_WIDTH**2 / 0.5e12
    cpu = challenge.gflops(sizing.n, cpu_s + 0.002, sizing.credit_s, sizing.steps)
    gpu = challenge.gflops(sizing.n, sizing.claim_s * 1.5 + 0.002, sizing.credit_s, sizing.steps)
    assert cpu == pytest.approx(500, rel=0.01)
    assert not challenge.passes(cpu, claimed)
    assert challenge.passes(gpu, claimed)
    named = challenge.label(ComputeUnit.GPU_TORCH, "cuda:0")
    assert challenge.reason(sizing.n, cpu, claimed, steps=sizing.steps, named=named) == (
        f"challenge on GPU (PyTorch) cuda:0: n=16384 x 349 steps, {cpu / 1e3:.3g} TFLOPS measured against 20 "
        "claimed (at least 1/2.5 of the claim needed)"
    )


def test_a_gpu_claim_with_no_unit_to_run_the_chain_through_is_refused_as_such() -> None:
    honest = Calibration(cpu_gflops=10.0, mem_bandwidth_gbs=10.0, seconds=1.0, gpu_tflops={"cuda:0": 30.0})
    profile = DeviceProfile(
        device_name="w", soc="cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16, calibration=honest,
        units=(UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=True, provider="CUDAExecutionProvider"),),
    )  # fmt: skip
    assert challenge.gpu_claims(profile) == (("cuda:0", 30e3),)
    assert challenge.gpu_unit(profile) is None
    torch_too = profile.with_(units=(*profile.units, UnitStatus(unit=ComputeUnit.GPU_TORCH, usable=True)))
    assert challenge.gpu_unit(torch_too) == ComputeUnit.GPU_TORCH
    assert challenge.no_gpu_kernel("cuda:0").startswith("challenge: gpu_tflops[cuda:0] unverified")


def test_chain_frames_are_bounded_on_the_wire() -> None:
    seed = ChallengeChainSeed(round=2, n=CHAIN_MAX_N, steps=CHAIN_MAX_STEPS, seed=5)
    assert decode(encode(seed)) == seed
    opened = ChallengeUnitOpen(unit=ComputeUnit.GPU_TORCH, device="cuda:0")
    assert decode(encode(opened)) == opened
    for field, value in (("n", CHAIN_MAX_N + 1), ("steps", CHAIN_MAX_STEPS + 1), ("steps", 0)):
        body = {"kind": "challenge_chain_seed", "round": 0, "n": 64, "steps": 1, "seed": 1, field: value}
        with pytest.raises(RemoteProtocolError):
            decode(msgpack.packb(body))
