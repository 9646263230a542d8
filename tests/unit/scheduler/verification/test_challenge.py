"""The challenge's draws, commitment, reveal and time bound (`scheduler.verification.challenge`),
against the real kernels the worker's child runs (`drivers.measuring.challengechild`, the CPU's chain in
numpy; `drivers.measuring.chainchild`, the GPU's through torch, on torch's CPU device), with no network."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from kit.extras import module

from drivers.measuring import calibrate
from drivers.measuring.chainchild import chain as torch_chain
from drivers.measuring.chainchild import throughput
from drivers.measuring.challengechild import chain, digests, exact_rows, expand, row_bytes
from protocol import (
    CHAIN_MAX_N,
    CHAIN_MAX_STEPS,
    CHALLENGE_MIN_N,
    CHALLENGE_WIDTH,
    CPU_CHAIN_N,
    DIGEST_BYTES,
    Calibration,
    ChallengeChainSeed,
    ChallengeCommit,
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
N, STEPS = 96, 4  # a short chain: the checks (not the speed) are under test


def _honest(seed: int, n: int = N, steps: int = STEPS) -> tuple[bytes, list[int], list[bytes], list[bytes]]:
    """A worker's commitment and the revealed rows for the rows the submitter draws, with the truth."""
    c = chain(*expand(seed, n), steps)
    rows = list(challenge.rows_of(KEY, f"s{seed}", n))
    return digests(c), rows, row_bytes(c, rows), exact_rows(seed, n, steps, rows)


def test_an_honest_chain_stands() -> None:
    committed, rows, revealed, exact = _honest(7)
    assert challenge.commit_problem(committed, N) == ""
    assert len(rows) == challenge.ROWS_CHECKED == len(set(rows))
    assert challenge.rows_problem(rows, revealed, committed, exact) == ""


def test_the_generator_is_the_documented_one() -> None:
    """PCG64 raw words, the low 32 bits first: X0 the top 13 bits less 4096, B the top 4 less 8."""
    x0, b = expand(11, 4)
    words = np.random.PCG64(11).random_raw(1024 + 1)
    firsts = [int(words[0]) & 0xFFFFFFFF, int(words[0]) >> 32]
    assert [float(x0[0, 0]), float(x0[0, 1])] == [(w >> 19) - 4096 for w in firsts]
    first_b = int(words[1024]) & 0xFFFFFFFF  # the word after X0's 4 x 512
    assert float(b[0, 0]) == (first_b >> 28) - 8
    assert x0.dtype == b.dtype == np.float32
    assert (x0.shape, b.shape) == ((4, CHALLENGE_WIDTH), (CHALLENGE_WIDTH, CHALLENGE_WIDTH))
    assert not np.array_equal(expand(12, 4)[0], x0)


def test_the_cpu_chain_is_the_gpu_kernels_and_the_submitters_exact_recomputation() -> None:
    """numpy's chain (the CPU's kernel, a mask for the wrap) and torch's (the GPU's, `remainder`) give
    the same rows bit for bit, and every checked row equals the float64 recomputation."""
    module("torch")
    n, steps, seed = 96, 5, 31
    x0, b = expand(seed, n)
    assert (x0.min(), x0.max(), b.min(), b.max()) == (-4096, 4095, -8, 7)
    c = chain(x0, b, steps)
    assert np.array_equal(c, torch_chain(x0, b, steps, "cpu"))
    rows = list(challenge.rows_of(KEY, "chain", n))
    assert (
        challenge.rows_problem(rows, row_bytes(c, rows), digests(c), exact_rows(seed, n, steps, rows)) == ""
    )
    assert not np.array_equal(chain(x0, b, steps + 1), c)  # every step changes the rows


def test_a_tampered_row_with_its_digest_redone_is_refused_by_the_exact_check() -> None:
    committed, rows, revealed, exact = _honest(8)
    forged = revealed[3][:-2] + bytes([revealed[3][-2] ^ 1, revealed[3][-1]])
    start = rows[3] * DIGEST_BYTES
    recommitted = committed[:start] + challenge.row_digest(forged) + committed[start + DIGEST_BYTES :]
    tampered = [*revealed[:3], forged, *revealed[4:]]
    problem = challenge.rows_problem(rows, tampered, recommitted, exact)
    assert problem == f"row {rows[3]} differs from the exact chain in 1 of its {CHALLENGE_WIDTH} values"


def test_a_row_that_does_not_match_its_committed_digest_is_refused() -> None:
    committed, rows, revealed, exact = _honest(9)
    other = row_bytes(chain(*expand(10, N), STEPS), rows[:1])[0]  # a true row of another chain
    problem = challenge.rows_problem(rows, [other, *revealed[1:]], committed, exact)
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
        rows, revealed[:revealed_rows], committed, exact
    )
    assert problem.startswith(why)


def test_a_chain_in_lower_precision_or_with_a_step_skipped_is_refused() -> None:
    """TF32 and float16 keep 11 significant bits of X's 12: their rows are wrong, not approximately
    right; a worker that skips a step commits rows that are not the chain's either."""
    n, steps, seed = 64, 3, 32
    x0, b = expand(seed, n)
    eleven_bits = np.where(np.abs(x0) >= 2048, np.round(x0 / 2) * 2, x0).astype(np.float32)
    rows = list(challenge.rows_of(KEY, "tf32", n))
    exact = exact_rows(seed, n, steps, rows)
    for cheap in (chain(eleven_bits, b, steps), chain(x0, b, steps - 1)):
        problem = challenge.rows_problem(rows, row_bytes(cheap, rows), digests(cheap), exact)
        assert "differs from the exact chain in" in problem, problem


def test_a_worker_that_skipped_rows_passes_about_f_to_the_k() -> None:
    """Rows it skipped are committed as zeros (it cannot know which will be named): over 300 drawn
    challenges, computing 90 % of the rows passes about 0.9 ** 16 = 18.5 % of them, 50 % none."""
    n, steps = 64, 2
    c = chain(*expand(5, n), steps)
    truth = exact_rows(5, n, steps, range(n))
    for fraction, low, high in ((0.9, 0.1, 0.3), (0.5, 0.0, 0.0)):
        done = c.copy()
        done[int(fraction * n) :] = 0
        committed = digests(done)
        passed = 0
        for k in range(300):
            rows = challenge.rows_of(DrawKey(bytes([k % 256, k // 256]) * 16), "skip", n)
            revealed = row_bytes(done, rows)
            passed += challenge.rows_problem(rows, revealed, committed, [truth[r] for r in rows]) == ""
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
def test_a_cpu_claim_is_sized_as_steps_of_the_calibrations_own_product(claimed: float) -> None:
    """512 rows (the calibration's 512 x 512 matrix, whatever the claim) and as many steps as the
    claim takes for `TARGET_S`; a claim too small for one step of them gets fewer rows."""
    sizing = challenge.size(claimed, 0.001)
    assert CHALLENGE_MIN_N <= sizing.n <= CPU_CHAIN_N
    assert 1 <= sizing.steps <= CHAIN_MAX_STEPS
    if claimed >= 5.0:
        assert sizing.n == CPU_CHAIN_N
    if 30.0 <= claimed < 3000.0:  # enough steps that rounding them moves little, and under the cap
        assert sizing.claim_s == pytest.approx(challenge.TARGET_S, rel=0.05)
    assert sizing.credit_s == 0.001
    assert sizing.deadline_s > challenge.SLACK * sizing.claim_s


@pytest.mark.parametrize("claimed", [50.0, 250.0, 1000.0])
def test_a_cpu_round_is_the_calibrations_product_with_little_else_timed(claimed: float) -> None:
    """The cause of the chain on the CPU, pinned (its speed is measured by
    benchmarks/challenge_noise.py): X is the calibration's own matrix (512 x 512, in cache as it
    is), and what a round expands and hashes is under a thousandth of a byte a flop. 1.0.0's single
    n x 512 product expanded and hashed 4 KiB a row of 512 KiFLOP (7.8e-3 a flop), which cost a CPU
    with AVX-512 as much as the product: honest rounds landed at 0.37 of the calibration."""
    assert calibrate.MATMUL_N == CPU_CHAIN_N == CHALLENGE_WIDTH
    sizing = challenge.size(claimed, 0.001)
    flops = 2 * sizing.n * sizing.steps * CHALLENGE_WIDTH**2
    expanded = 4 * (sizing.n + CHALLENGE_WIDTH) * CHALLENGE_WIDTH  # X0 and B, float32
    hashed = 2 * sizing.n * CHALLENGE_WIDTH  # the result's int16 rows
    assert (expanded + hashed) / flops < 1e-3
    single_product = (4 * 2 * CHALLENGE_WIDTH) / (2 * CHALLENGE_WIDTH**2)  # 1.0.0: a row in, a row out
    assert single_product > 7e-3


def test_the_time_bound_refuses_a_4x_claim_and_passes_an_honest_one() -> None:
    claimed = 40.0
    sizing = challenge.size(claimed, 0.002)
    honest = challenge.gflops(sizing.n, sizing.claim_s * 1.5 + 0.002, sizing.credit_s, sizing.steps)
    liar = challenge.gflops(sizing.n, sizing.claim_s * 4 + 0.002, sizing.credit_s, sizing.steps)
    assert challenge.passes(honest, claimed)  # loaded: 1.5x slower
    assert not challenge.passes(liar, claimed)  # its true speed is 1/4
    assert liar == pytest.approx(claimed / 4, rel=0.01)
    assert challenge.reason(sizing.n, liar, claimed, steps=sizing.steps) == (
        f"challenge: n=512 x {sizing.steps} steps, {liar:.3g} GFLOPS measured against 40 claimed "
        "(at least 1/1.82 of the claim needed)"
    )


def test_the_line_sits_midway_between_an_honest_round_and_a_liars_best_one() -> None:
    """Issue 49: the line is the geometric midpoint of an honest device's best round (`HONEST_RATIO`
    of its calibration) and the best a `LIAR_FACTOR` liar can show (its device's own best round, the
    same ratio of the truth); each side keeps the same margin, sqrt(2.5) = 1.58, where the old line
    (1/2.5 of the claim) held a 2.5x liar by 13 %."""
    claimed = 100.0
    honest = challenge.HONEST_RATIO * claimed
    liar_best = challenge.HONEST_RATIO * claimed / challenge.LIAR_FACTOR  # it can only be slower
    line = claimed / challenge.SLACK
    assert honest / line == pytest.approx(line / liar_best) == pytest.approx(math.sqrt(challenge.LIAR_FACTOR))
    assert round(challenge.SLACK, 3) == 1.817
    margin = math.sqrt(challenge.LIAR_FACTOR)
    assert challenge.passes(honest / margin * 1.001, claimed)  # an honest device at 63 % of its speed
    assert not challenge.passes(honest / margin * 0.999, claimed)
    assert not challenge.passes(liar_best, claimed)  # whatever it does with its timing
    assert not challenge.passes(liar_best * margin * 0.999, claimed)  # even on a device 1.58x faster
    assert 1 / 2.5 * challenge.LIAR_FACTOR / challenge.HONEST_RATIO < 1.15  # the old line's thin margin


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.1, 0.5, 2.0])
def test_delayed_pongs_buy_a_4x_liar_nothing(delay_s: float) -> None:
    """A worker that holds every pong back is credited a longer trip, but the chain grows with the
    trip and the credit is capped at a quarter of the claim's time: a 4x claim still fails."""
    claimed, true_rtt = 40.0, 0.001
    sizing = challenge.size(claimed, true_rtt + delay_s)
    elapsed = 4 * sizing.claim_s + true_rtt  # what the seed-to-commit exchange really takes at 1/4
    measured = challenge.gflops(sizing.n, elapsed, sizing.credit_s, sizing.steps)
    assert sizing.credit_s <= sizing.claim_s / challenge.RTT_SHARE
    assert not challenge.passes(measured, claimed)
    assert math.isfinite(measured)


def test_challenge_frames_are_bounded_on_the_wire() -> None:
    commit = ChallengeCommit(round=1, digests=bytes(16 * 1024))
    assert decode(encode(commit)) == commit
    too_big = msgpack.packb(
        {"kind": "challenge_commit", "round": 0, "digests": bytes(16 * (CHAIN_MAX_N + 1))}
    )
    with pytest.raises(RemoteProtocolError):
        decode(too_big)
    retired = msgpack.packb({"kind": "challenge_seed", "round": 0, "n": 64, "seed": 1})  # 1.0.0's seed
    with pytest.raises(RemoteProtocolError):
        decode(retired)


def test_a_gpu_claim_is_calibrated_on_the_chain_itself() -> None:
    """`throughput` (what the probe records as `gpu_tflops` on a CUDA device) times the very chain a
    challenge runs, here on torch's CPU device, and refuses a device torch cannot run it on."""
    module("torch")
    gflops = throughput("cpu", 0.05, n=64, steps=2)
    assert math.isfinite(gflops)
    assert gflops > 0
    with pytest.raises(ValueError, match="sees no CUDA device for cuda:3"):
        throughput("cuda:3", 0.05, n=64, steps=2)


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
    assert not challenge.passes(cpu, claimed, gpu=True)
    assert challenge.passes(gpu, claimed, gpu=True)
    named = challenge.label(ComputeUnit.GPU_TORCH, "cuda:0")
    assert challenge.reason(sizing.n, cpu, claimed, steps=sizing.steps, named=named) == (
        f"challenge on GPU (PyTorch) cuda:0: n=16384 x 349 steps, {cpu / 1e3:.3g} TFLOPS measured against 20 "
        "claimed (at least 1/2.5 of the claim needed)"
    )


def test_a_gpu_chain_keeps_its_own_line_where_the_lent_h200s_rounds_fall_on_each_side() -> None:
    """The H200's rounds (benchmarks/notes/gpu_run.md): an honest one at 19.2 TFLOPS of a 36.4 claim, a
    3x liar's at 29.9 of 109.2. The CPU's midpoint line would refuse the honest GPU; the GPU's passes it
    and still refuses the liar."""
    honest, honest_claim, liar, liar_claim = 19.2e3, 36.4e3, 29.9e3, 109.2e3
    assert not challenge.passes(honest, honest_claim)  # the CPU's line: 0.55 of the claim
    assert challenge.passes(honest, honest_claim, gpu=True)
    assert not challenge.passes(liar, liar_claim, gpu=True)
    assert challenge.GPU_SLACK > challenge.SLACK


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


@pytest.mark.parametrize("claimed", [0.01, 1.0, 30.0, 250.0, 3000.0])
@pytest.mark.parametrize("rtt_s", [0.0, 0.05, 1.0])
def test_the_round_a_submitter_sizes_for_a_claim_is_one_the_worker_computes(
    claimed: float, rtt_s: float
) -> None:
    """Issue 50, scope 3: the worker bounds the CPU rounds it computes by its own claim; every round an
    honest submitter sizes for that claim over a round trip of up to 1 s fits the bound."""
    sized = challenge.size(claimed, rtt_s)
    assert challenge.cpu_round_problem(sized.n, sized.steps, claimed) == ""


def test_a_cpu_round_past_the_chain_or_the_workers_own_claim_is_refused() -> None:
    """A stranger's n = 16,384 (the GPU chain's rows) on the CPU stream, or steps far past what the
    worker claims to compute in `WORKER_ROUND_S`, is refused before any child computes it."""
    assert "at most 512 rows, not 16384" in challenge.cpu_round_problem(16384, 2048, 250.0)
    assert "at most 512 rows" in challenge.cpu_round_problem(513, 1, None)
    bound = math.ceil(challenge.WORKER_ROUND_S * 1.0e9 / (512 * 2 * 512**2))  # a 1 GFLOPS claim: 15 steps
    assert challenge.cpu_round_problem(512, bound, 1.0) == ""
    assert f"at most {bound})" in challenge.cpu_round_problem(512, bound + 1, 1.0)
    assert challenge.cpu_round_problem(512, 2048, None) == ""  # no claim: the rows alone are bounded


@pytest.mark.parametrize("claimed_tflops", [0.5, 18.6, 36.4, 109.2, 1000.0])
@pytest.mark.parametrize("rtt_s", [0.0, 0.05, 1.0])
def test_the_gpu_round_a_submitter_sizes_for_a_claim_is_one_the_worker_computes(
    claimed_tflops: float, rtt_s: float
) -> None:
    """Issue 50, scope 3 (GPU): every GPU round an honest submitter sizes for a device's claim over a
    round trip of up to 1 s fits the worker's bound (the H100's and H200's claims of issue 54 among
    them, and a 3x lie's)."""
    claimed = claimed_tflops * 1e3
    sized = challenge.size_chain(claimed, rtt_s)
    assert challenge.gpu_round_problem(sized.n, sized.steps, claimed) == ""


def test_a_gpu_round_past_the_workers_own_claim_for_the_device_is_refused() -> None:
    """A stranger asking the frame's most, 2,048 steps of 16,384 rows (17.6 TFLOP), of a GPU that
    claims 1 TFLOPS (17.6 s of it) is refused before the child computes it; the same round of a
    20 TFLOPS claim (0.9 s) is computed; no claim for the device bounds nothing more."""
    n = 16384
    bound = math.ceil(challenge.WORKER_ROUND_S * 1e12 / (n * 2 * 512**2))  # 466 steps
    assert challenge.gpu_round_problem(n, bound, 1e3) == ""
    said = challenge.gpu_round_problem(n, 2048, 1e3)
    assert said == (
        f"2048 steps of 16384 rows is more than 4 s of this worker's claim for the device "
        f"(1e+03 GFLOPS: at most {bound})"
    )
    assert challenge.gpu_round_problem(n, 2048, 20e3) == ""
    assert challenge.gpu_round_problem(n, 2048, None) == ""
