"""Reputation Sybils cannot turn (issue 38, scope 4): what a settled group says of each peer is
weighed by who said it (`evidence.weigh`), and a record turns on nobody's word alone
(`reputation.PeerRecord`: several partners over several networks, decaying)."""

from __future__ import annotations

import math

from scheduler.verification import Evidence, Outcome, PeerRecord, Replica, settle, weigh
from scheduler.verification.reputation import HALF_LIFE_S, TRUST_AFTER, standing

ESTABLISHED = PeerRecord(agreed=9, streak=9)


def test_two_sybils_on_one_network_never_move_an_honest_record_however_often_they_outvote_it() -> None:
    networks = {"honest": "10.0.1.0/24", "s1": "10.0.2.0/24", "s2": "10.0.2.0/24"}
    records = {"honest": ESTABLISHED, "s1": ESTABLISHED, "s2": ESTABLISHED}
    for _ in range(50):
        settled = settle(
            [Replica("honest", 10.0, 0.01), Replica("s1", 5.0, 0.01), Replica("s2", 5.05, 0.01)], 3
        )
        assert settled.agreed == ("s1", "s2")
        said = dict(weigh(settled, ["honest", "s1", "s2"], networks, records))
        assert said["honest"].weight == 0.0
        records = {p: records[p].after(ev) for p, ev in said.items()}
    honest = records["honest"]
    assert (honest.disagreed, honest.streak, honest.offsets) == (0, 9, 0)
    assert not honest.distrusted
    assert honest.trusted
    assert honest.evidence("overruled") == "overruled: s1 (10.0.2.0/24) 50, s2 (10.0.2.0/24) 50"


def test_a_liar_in_a_class_of_two_pays_for_its_lies_and_leaves_its_partner_unbiased() -> None:
    """No majority: each peer gets half the other's standing against it. The established honest
    peer costs the new liar in full (its streak reset, checked every time); the liar costs it an
    eighth. Small lies within the band give both offsets of opposite signs, and one partner's
    comparisons never make either biased."""
    networks = {"honest": "10.0.1.0/24", "liar": "10.0.2.0/24"}
    records = {"honest": ESTABLISHED, "liar": PeerRecord()}
    for _ in range(20):
        pair = settle([Replica("honest", 10.0, 0.01), Replica("liar", 5.0, 0.01)], 2)
        disagreed = settle([Replica("honest", 10.0, 0.01), Replica("liar", 5.0, 0.01)], 3)
        assert (pair.outcome, disagreed.outcome) == (Outcome.PENDING, Outcome.DISAGREED)
        said = dict(weigh(disagreed, ["honest", "liar"], networks, records))
        assert said["liar"].weight == 0.5 * standing(ESTABLISHED)
        records = {p: records[p].after(ev) for p, ev in said.items()}
    liar, honest = records["liar"], records["honest"]
    assert liar.disagreed > 2 * honest.disagreed
    assert liar.streak == 0
    assert not liar.trusted
    assert not liar.distrusted  # one partner's word: never enough
    assert honest.streak == 9
    assert honest.trusted
    for _ in range(40):  # 0.9x: within the band, offsets of opposite signs
        close = settle([Replica("honest", 10.0, 0.01), Replica("liar", 9.0, 0.01)], 2)
        said = dict(weigh(close, ["honest", "liar"], networks, {**records, "liar": ESTABLISHED}))
        records = {p: records[p].after(ev) for p, ev in said.items()}
    assert records["honest"].offset is not None
    assert records["honest"].offset > math.log(1.1) - 0.01
    assert not records["honest"].biased
    assert not records["honest"].distrusted


def test_fresh_partners_count_less_and_distrusted_ones_nothing() -> None:
    assert standing(PeerRecord()) == 0.25
    assert standing(PeerRecord(agreed=TRUST_AFTER)) == 1.0
    caught = PeerRecord().after(Evidence(False, 1.0, None, (("a", "n1"), ("b", "n2"))))
    caught = caught.after(Evidence(False, 1.0, None, (("c", "n3"),)))
    assert not caught.distrusted  # twice: not yet (`OUTVOTED_MIN`)
    caught = caught.after(Evidence(False, 1.0, None, (("a", "n1"),)))
    assert caught.distrusted
    assert standing(caught) == 0.0
    assert caught.why_distrusted().endswith("against it: a (n1) 2, b (n2) 1, c (n3) 1")  # on whose evidence


def test_records_decay_with_a_half_life() -> None:
    t0 = 1.8e9
    record = PeerRecord().after(Evidence(False, 1.0, None, (("a", "n1"), ("b", "n2"), ("c", "n3")), t0))
    record = record.after(Evidence(False, 1.0, None, (("a", "n1"),), t0))
    record = record.after(Evidence(False, 1.0, None, (("b", "n2"),), t0))
    assert record.distrusted
    later = record.decayed(t0 + HALF_LIFE_S)
    assert later.disagreed == 1.5
    assert not later.distrusted
    assert record.decayed(t0 - 10) is record  # never forward from the past
