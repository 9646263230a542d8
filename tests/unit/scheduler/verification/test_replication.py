"""Device classes, replica choice, agreement, reputation and claims: the pure parts of verification by
replication (issue 31). The simulation in benchmarks/replication_sim.py runs these same functions."""

from __future__ import annotations

import math
import statistics

import pytest

from protocol import ComputeUnit, DeviceProfile
from protocol.values import Calibration, GpuInfo, UnitStatus
from scheduler.language import Draws
from scheduler.verification import (
    Candidate,
    Outcome,
    PeerRecord,
    Replica,
    by_class,
    claim_problems,
    device_class,
    pick_replicas,
    pooled_spread,
    settle,
    should_check,
    spread_of,
)
from scheduler.verification.agreement import (
    BOARD,
    CEILING,
    FAR,
    POOL_KEEP,
    POOL_MIN,
    PRIOR,
    K,
    agree,
    band,
    pool_error,
    process_error,
)
from scheduler.verification.classes import major_minor, memory_bucket_gib
from scheduler.verification.draws import DrawKey, Purpose
from scheduler.verification.reputation import BIAS_MIN, TRUST_AFTER, Evidence, check_probability


def seen(agreed: bool, offset: float | None = None, k: int = 0) -> Evidence:
    """One settled group's evidence on a peer from independent partners (one of three, on three
    networks, in turn), of full weight."""
    return Evidence(agreed, 1.0, offset, ((f"p{k % 3}", f"10.0.{k % 3}.0/24"),))


CPU = ComputeUnit.CPU_ONNX


def profile(**changes: object) -> DeviceProfile:
    base: dict[str, object] = {
        "device_name": "board", "soc": "Cortex-A76", "cores_physical": 4, "cores_logical": 4,
        "ram_mb": 8000, "os": "Linux", "os_version": "6.1.0-18-arm64", "runtimes": {"onnxruntime": "1.31.1"},
        "fingerprint": "fp", "units": (UnitStatus(unit=CPU, usable=True, provider="CPUExecutionProvider"),),
    }  # fmt: skip
    base.update(changes)
    return DeviceProfile.model_validate(base)


def test_two_boards_of_one_model_share_a_class_whatever_their_names_and_patch_levels() -> None:
    a = device_class(profile(device_name="vm", fingerprint="a"), CPU)
    b = device_class(
        profile(device_name="lab-7", fingerprint="b", os_version="6.1.0-21-arm64", ram_mb=8192), CPU
    )
    assert a == b
    assert a.name == b.name
    assert a.name.startswith("cls-")


@pytest.mark.parametrize(
    "change",
    [{"soc": "Cortex-A72"}, {"cores_logical": 8}, {"ram_mb": 32000}, {"os_version": "6.6.0"},
     {"runtimes": {"onnxruntime": "1.30.0"}}, {"os": "Darwin"}],
)  # fmt: skip
def test_anything_that_moves_a_timing_splits_the_class(change: dict[str, object]) -> None:
    assert device_class(profile(), CPU) != device_class(profile(**change), CPU)


def test_the_accelerator_counts_for_gpu_units_only() -> None:
    gpu = (GpuInfo(name="NVIDIA H100", vram_mb=80000, source="nvml"),)
    other = (GpuInfo(name="NVIDIA L4", vram_mb=24000, source="nvml"),)
    assert device_class(profile(gpus=gpu), CPU) == device_class(profile(gpus=other), CPU)
    unit = ComputeUnit.GPU_ONNX
    assert device_class(profile(gpus=gpu), unit) != device_class(profile(gpus=other), unit)


def test_memory_buckets_and_versions() -> None:
    assert [memory_bucket_gib(mb) for mb in (0, 7800, 8192, 16000, 64000)] == [0, 8, 8, 16, 64]
    assert major_minor("6.1.0-18-amd64") == "6.1"
    assert major_minor("1.31.1") == "1.31"


def cand(i: int, cls: str = "A", host: str | None = None) -> Candidate:
    from scheduler.verification import DeviceClass

    return Candidate(f"p{i}", DeviceClass(cls), f"h{i}" if host is None else host)


def test_replicas_are_distinct_identities_on_distinct_hosts_of_one_class() -> None:
    pool = [cand(0), cand(1, host="h0"), cand(2, "B"), cand(3), cand(4)]
    chosen = pick_replicas(pool, 3)
    assert [c.peer_id for c in chosen] == ["p0", "p3", "p4"]  # p1 shares p0's host, p2 is another class


def test_the_class_with_enough_independent_peers_is_chosen_and_taken_peers_are_skipped() -> None:
    pool = [cand(0, "A"), cand(1, "B"), cand(2, "B"), cand(3, "A", host="h0")]
    assert [c.peer_id for c in pick_replicas(pool, 2)] == ["p1", "p2"]
    again = pick_replicas(pool, 1, taken=["p1"], taken_hosts=["h1"], device_class=pool[1].device_class)
    assert [c.peer_id for c in again] == ["p2"]
    assert len(by_class(pool)) == 2


def test_peers_with_no_known_host_never_count_toward_a_quorum() -> None:
    pool = [cand(0, host=""), cand(1, host=""), cand(2)]
    assert [c.peer_id for c in pick_replicas(pool, 3)] == ["p2"]


def rep(peer: str, median: float, spread: float = 0.005, fingerprint: str = "") -> Replica:
    return Replica(peer, median, spread, fingerprint)


def test_spread_is_the_standard_error_of_a_median_of_process_medians() -> None:
    assert spread_of([10.0]) == 0.0
    medians = [9.0, 10.0, 11.0]
    assert spread_of(medians) == pytest.approx(1.2533 * statistics.stdev(medians) / 3**0.5 / 10, rel=1e-3)


def test_agreement_within_the_band_and_not_beyond() -> None:
    a = rep("a", 10.0)
    width = band(0.005)
    assert width == pytest.approx(K * (2 * 0.005**2 + 2 * BOARD**2) ** 0.5)  # never under K x sqrt(2) x 1 %
    assert agree(a, rep("b", 10.0 * (1 + width * 0.99)), 0.005)
    assert not agree(a, rep("b", 10.0 * (1 + width * 1.01)), 0.005)
    assert not agree(a, rep("b", 10.0, fingerprint="other"), 0.005)  # same time, other outputs
    assert band(0.05) > band(0.005)  # a noisy class widens it
    # a replica's own spread never does: the band is the class's whatever either replica says
    assert agree(a, rep("b", 10.0 * (1 + width * 0.99), spread=0.4), 0.005)
    assert not agree(a, rep("b", 10.0 * (1 + width * 1.01), spread=0.4), 0.005)


def test_a_cheater_at_half_its_latency_is_the_outlier_once_a_third_replica_settles_it() -> None:
    honest, cheat = rep("honest", 10.0), rep("cheat", 5.0)
    first = settle([honest, cheat], wanted=2)
    assert first.outcome == Outcome.PENDING
    done = settle([honest, cheat, rep("third", 10.2)], wanted=2)
    assert done.outcome == Outcome.REPLICATED
    assert done.agreed == ("honest", "third")
    assert done.outliers == (("cheat", 5.0),)
    assert "cheat: 5 ms against the agreed" in done.reason
    assert done.label(3) == "replicated 2/3"
    assert done.figure_ms == pytest.approx(10.1)


def test_no_majority_is_disagreed_and_one_result_is_single() -> None:
    assert settle([rep("a", 10.0)], wanted=2).label(1) == "single"
    spread_out = settle([rep("a", 10.0), rep("b", 7.0), rep("c", 5.0)], wanted=2)
    assert spread_out.outcome == Outcome.DISAGREED
    assert spread_out.figure_ms is None


def test_a_replica_between_an_honest_one_and_a_cheater_sides_with_the_tighter_pair() -> None:
    quiet = 0.005  # a class whose honest replicas' spread is 0.5 %: a band of 5.5 %
    got = settle([rep("cheat", 9.3), rep("honest", 10.0), rep("middle", 9.65)], wanted=2, class_spread=quiet)
    assert got.agreed == ("honest", "middle")


def test_distrusted_peers_cannot_form_a_majority() -> None:
    two_cheats = [rep("c1", 5.0), rep("c2", 5.05), rep("honest", 10.0)]
    assert settle(two_cheats, wanted=2).agreed == ("c1", "c2")
    assert settle(two_cheats, wanted=2, distrusted={"c1": ""}).outcome == Outcome.DISAGREED


def test_the_pool_starts_from_the_prior_and_keeps_the_recent_honest_errors() -> None:
    assert pool_error([0.02] * (POOL_MIN - 1)) == PRIOR  # the documented prior before any history
    assert pool_error([0.0] * 50) == PRIOR  # one-process replicas say nothing of the scatter
    assert pool_error([0.01] * 5 + [0.03] * 6) == 0.03
    assert pool_error([0.5] * 100 + [0.02] * POOL_KEEP) == 0.02  # only the last POOL_KEEP count
    assert pooled_spread([0.03] * POOL_MIN, 9) == pytest.approx(0.01)  # over sqrt(processes)
    assert process_error(0.01, 9) == pytest.approx(0.03)


def test_a_replica_that_inflates_its_own_spread_cannot_widen_the_band_nor_vouch() -> None:
    """A cheater at 0.7x that scatters its processes (0.5x, 0.7x, 1.0x) to widen its band: the band
    is its class's, and a spread over FAR x its class's bars it from any majority."""
    truth = 10.0
    scattered = [truth * f for f in (0.5, 0.7, 1.0)]
    liar = Replica("liar", statistics.median(scattered), spread_of(scattered))
    honest, second = rep("honest", truth, spread=0.02), rep("second", truth * 1.02, spread=0.02)
    spread = pooled_spread([], 3)  # no history yet: the prior
    assert liar.spread > FAR * spread
    assert not agree(honest, liar, spread)
    first = settle([honest, liar], wanted=2, class_spread=spread)
    assert first.outcome == Outcome.PENDING
    done = settle([honest, liar, second], wanted=2, class_spread=spread)
    assert done.agreed == ("honest", "second")
    assert "liar" in dict(done.outliers)
    assert "cannot vouch: its own spread" in done.reason
    # its figure is outside the band as well: the lie is named first, then what bars it (CI at
    # fa42f84 read only "cannot vouch" on a timing liar, and the lab could not tell it was the lie)
    assert f"liar: {liar.median_ms:.4g} ms against the agreed" in done.reason
    assert done.reason.index("against the agreed") < done.reason.index("cannot vouch")
    near = Replica("near", truth * 0.98, spread_of(scattered))  # within the band, still no voucher
    assert settle([honest, near], wanted=2, class_spread=spread).outcome == Outcome.PENDING
    inside = settle([honest, near, second], wanted=2, class_spread=spread)
    assert f"near: {near.median_ms:.4g} ms, cannot vouch" in inside.reason  # only the bar keeps it out


def test_a_peer_earns_spot_checks_and_loses_them_at_a_disagreement() -> None:
    record = PeerRecord()
    assert check_probability(record, 0.1) == 1.0
    for _ in range(TRUST_AFTER):
        record = record.after(seen(True))
    assert record.trusted
    assert check_probability(record, 0.1) == 0.1
    caught = record.after(seen(False))
    assert not caught.trusted
    assert check_probability(caught, 0.1) == 1.0
    assert not caught.distrusted
    twice = PeerRecord().after(seen(False, k=0)).after(seen(False, k=1))
    assert not twice.distrusted  # two partners: not yet independent evidence
    assert twice.after(seen(False, k=2)).distrusted


def test_spot_checks_are_drawn_from_the_campaigns_secret_and_the_task() -> None:
    one, other = DrawKey(bytes(32)), DrawKey(bytes([1]) * 32)
    assert one.draw(Purpose.SPOT_CHECK, "t") == one.draw(Purpose.SPOT_CHECK, "t")
    assert one.draw(Purpose.SPOT_CHECK, "t") != other.draw(Purpose.SPOT_CHECK, "t")
    assert one.draw(Purpose.SPOT_CHECK, "t") != one.draw(Purpose.REPLICA_PEER, "t")
    assert "00" not in repr(one)  # the secret is never printed
    trusted = PeerRecord(agreed=TRUST_AFTER, streak=TRUST_AFTER)
    checked = sum(should_check(trusted, 0.1, one, f"task-{i}") for i in range(2000))
    assert 140 < checked < 260  # about 10 %
    with pytest.raises(ValueError, match="32 bytes"):
        DrawKey(b"campaign-1")


def test_claims_beyond_physics_or_the_class_are_unverified() -> None:
    honest = Calibration(cpu_gflops=40.0, mem_bandwidth_gbs=10.0, seconds=1.0)
    assert claim_problems(profile(calibration=honest)) == []
    fast = profile(calibration=honest.model_copy(update={"cpu_gflops": 5000.0}))
    assert "over 4 cores x 300 GFLOPS" in claim_problems(fast)[0]
    gpu_speed = profile(calibration=honest.model_copy(update={"gpu_tflops": {"cuda:0": 60.0}}))
    assert "with no GPU listed" in claim_problems(gpu_speed)[0]
    gpu_unit = profile(units=(UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=True),))
    assert "usable with no GPU listed" in claim_problems(gpu_unit)[0]
    peers = [profile(calibration=honest), profile(calibration=honest)]
    boosted = profile(calibration=honest.model_copy(update={"cpu_gflops": 100.0}))
    assert "2.50x its class's median" in claim_problems(boosted, peers)[0]
    assert claim_problems(profile(calibration=honest.model_copy(update={"cpu_gflops": 55.0})), peers) == []


def test_the_band_never_widens_past_its_ceiling_so_a_halving_cheat_never_agrees() -> None:
    honest, cheat = rep("h", 1.5, spread=0.6), rep("c", 0.74, spread=0.6)  # a loaded machine's scatter
    assert band(0.6) == CEILING
    assert not agree(honest, cheat, 0.6)
    assert agree(honest, rep("h2", 1.9, spread=0.6), 0.6)  # 27 % apart: within the ceiling


def test_outputs_that_differ_from_a_majority_are_outliers_even_when_timings_disagree() -> None:
    """On a loaded machine honest timings can be too far apart to agree; the replica that never ran
    the model is still caught by its outputs."""
    replicas = [
        rep("h1", 1.5, fingerprint="f"),
        rep("norun", 0.0001, fingerprint="zeros"),
        rep("h2", 6.4, fingerprint="f"),
    ]
    got = settle(replicas, wanted=2)
    assert got.outcome == Outcome.DISAGREED
    assert got.outliers == (("norun", 0.0001),)
    assert "norun: outputs differ from the majority's" in got.reason
    assert settle(replicas[:2], wanted=2).outliers == ()  # one against one: nobody is the majority


def test_a_peer_off_its_class_for_good_is_biased_and_an_honest_one_never_is() -> None:
    draws = Draws(3)
    honest, liar = PeerRecord(), PeerRecord()
    for k in range(60):  # one replica's noise (7.6 % a comparison) around 1.0x, and around 0.9x
        honest = honest.after(seen(True, draws.normal(0.0, 0.076), k))
        liar = liar.after(seen(True, math.log(0.9) + draws.normal(0.0, 0.076), k))
    assert not honest.biased
    assert not honest.distrusted
    assert honest.trusted
    assert liar.biased
    assert liar.distrusted
    assert not liar.trusted
    assert liar.offset == pytest.approx(math.log(0.9), abs=0.03)
    assert "x its class's over 60 comparisons" in liar.why_distrusted()
    early = PeerRecord()
    for k in range(BIAS_MIN - 1):  # too few comparisons to judge, however far off
        early = early.after(seen(True, math.log(0.5), k))
    assert not early.biased
    assert not early.trusted  # leaning off its class: checked every time until its record says
    assert early.after(seen(True, math.log(0.5), BIAS_MIN)).biased


def test_a_settlement_gives_each_replica_its_offset_from_the_others() -> None:
    settled = settle([Replica("a", 10.0, 0.01), Replica("b", 9.8, 0.01), Replica("c", 5.0, 0.01)], 2)
    assert settled.outcome == Outcome.REPLICATED
    assert settled.offset_of("a") == pytest.approx(math.log(10.0 / 9.8))
    assert settled.offset_of("b") == pytest.approx(math.log(9.8 / 10.0))
    assert settled.offset_of("c") == pytest.approx(math.log(5.0 / 9.9))  # against the agreed figure
    wrong = settle(
        [Replica("a", 10.0, 0.01, "x"), Replica("b", 10.0, 0.01, "x"), Replica("c", 5.0, 0.01, "y")], 2
    )
    assert wrong.offset_of("c") is None  # other outputs: wrong, not off


def test_spot_checks_wait_until_a_peers_offset_is_cleared() -> None:
    """Trust needs the mean offset within the tolerance by one standard error: a quiet class clears
    it in `TRUST_AFTER` comparisons, a noisy one takes more (one comparison tells less there)."""
    draws = Draws(5)
    quiet, noisy = PeerRecord(), PeerRecord()
    for k in range(TRUST_AFTER):
        quiet = quiet.after(seen(True, draws.normal(0.0, 0.01), k))
        noisy = noisy.after(seen(True, draws.normal(0.0, 0.15), k))
    assert quiet.trusted
    assert not noisy.trusted
    for k in range(200):
        noisy = noisy.after(seen(True, draws.normal(0.0, 0.15), k))
    assert noisy.trusted
    assert PeerRecord(agreed=TRUST_AFTER, streak=TRUST_AFTER).trusted  # a record from before offsets
