"""The replication simulation's figure, pinned by its cause: at 7.4 % process-median noise one
comparison cannot tell a 0.8-0.9x claim from noise, so without the offsets each settlement adds to a
peer's record (`reputation.PeerRecord.biased`) and the settling again of the groups a biased peer
agreed in, full replication showed 14 % of the cheating results; with them, none of a small fleet's. And a
reference device's: one owner's devices that outnumber the truth in a class win by majority, and lose
to the reference (issue 38, scope 6)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import replication_sim


def test_full_replication_shows_no_cheating_result_at_this_machines_worst_noise() -> None:
    fleet = argparse.Namespace(
        peers=200, classes=4, cheaters=0.05, tasks=3000, processes=3, strategy="scaled", spot=0.1
    )
    for seed in (1, 2):
        got = replication_sim.simulate(seed, replication_sim.NOISE["tiny-BERT (7.4 %)"], None, fleet)
        assert got["cheating_shown_pct"] <= 1.0, got
        assert got["honest_flagged_pct"] <= 1.5, got


def test_a_reference_device_closes_what_a_sybil_majority_opens() -> None:
    """A class where 30 % of the peers are one owner's devices on distinct networks, all reporting one
    factor: two of them in a quorum outvote the truth (and flag the honest peer). With one reference
    device per class in every quorum (the scheduler's own `references.judge`), none of their results
    is shown and honest flags fall back to noise."""
    fleet = argparse.Namespace(
        peers=200, classes=4, cheaters=0.3, tasks=1000, processes=3, strategy="sybil", spot=0.1
    )
    quiet = replication_sim.NOISE["ResNet18 (2.4 %)"]
    majority = replication_sim.simulate(1, quiet, None, fleet)
    assert majority["cheating_shown_pct"] > 5.0, majority
    referenced = replication_sim.simulate(1, quiet, None, fleet, reference=True)
    assert referenced["cheating_shown_pct"] == 0.0, referenced
    assert referenced["honest_flagged_pct"] <= 1.0, referenced
    assert referenced["reference_runs_pct"] == 100.0  # the cost: the reference runs every task once


def test_sybils_poisoning_honest_peers_outvote_them_but_turn_no_honest_record() -> None:
    """30 % of a class are one owner's keys on distinct networks, all at 0.5x: pairs of them outvote
    honest peers (flagged far above noise), yet no honest peer turns distrusted: evidence is weighed
    by the partners' records and a record turns only on three partners over two networks, at least
    three times (issue 38, scope 4)."""
    fleet = argparse.Namespace(
        peers=200, classes=2, cheaters=0.3, tasks=1000, processes=3, strategy="poison", spot=0.1
    )
    got = replication_sim.simulate(2, replication_sim.NOISE["MobileNetV2 (6.0 %)"], None, fleet)
    assert got["honest_flagged_pct"] > 5.0, got  # the attack is live
    assert got["honest_distrusted"] == 0, got


def test_a_reference_catches_the_intermittent_liar_by_its_offsets_against_the_reference() -> None:
    """A reference takes one replica of each task, so each stranger gets about 10 comparisons; a
    cheater that lies on nine tasks in ten at 0.5-0.9x (`predicting`) widens the spread the rule
    among strangers judges it by. Judged against the reference by the class's error
    (`offsets.ReferenceOffsets`, from 4 comparisons), none of its lies is shown in this fleet
    (7.3 % before), and no honest peer is distrusted."""
    fleet = argparse.Namespace(
        peers=100, classes=1, cheaters=0.1, tasks=1000, processes=3, strategy="predicting", spot=0.1
    )
    noisy = replication_sim.NOISE["tiny-BERT (7.4 %)"]
    got = replication_sim.simulate(1, noisy, 0.1, fleet, reference=True)
    assert got["cheating_shown_pct"] <= 1.0, got
    assert got["honest_flagged_pct"] <= 1.5, got
    assert got["honest_distrusted"] == 0, got
