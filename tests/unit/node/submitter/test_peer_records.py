"""The submitter's store keeps each peer's record of replicated results across campaigns."""

from __future__ import annotations

import sqlite3
from dataclasses import astuple
from pathlib import Path

import pytest

from node.submitter.store import CampaignStore
from scheduler.verification import POOL_KEEP, Evidence, PeerRecord, ReferenceOffsets
from scheduler.verification.reputation import HALF_LIFE_S


def agreed(at: float = 0.0, offset: float | None = None) -> Evidence:
    return Evidence(True, 1.0, offset, (("p", "10.0.1.0/24"),), at)


def against(at: float = 0.0, offset: float | None = None, weight: float = 1.0) -> Evidence:
    return Evidence(False, weight, offset, (("s1", "10.0.2.0/24"), ("s2", "10.0.3.0/24")), at)


def test_settled_groups_add_up_per_peer_and_survive_a_reopened_store(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.db")
    assert store.peer_records() == {}
    store.settled([("a", agreed()), ("b", agreed()), ("liar", against())])
    store.settled([("a", agreed()), ("c", agreed()), ("b", against(weight=0.25))])
    records = CampaignStore(tmp_path / "campaigns.db").peer_records()
    assert {p: (r.agreed, r.disagreed, r.streak) for p, r in records.items()} == {
        "a": (2, 0, 2),
        "b": (1, 0.25, 1),  # a light disagreement (fresh partners) keeps its streak
        "c": (1, 0, 1),
        "liar": (0, 1, 0),
    }
    assert [(w.peer_id, w.network, w.against) for w in records["liar"].witnesses] == [
        ("s1", "10.0.2.0/24", 1.0),
        ("s2", "10.0.3.0/24", 1.0),
    ]
    assert records["liar"] == store.peer_records()["liar"]  # the witnesses round-trip whole
    vouched = Evidence(True, 1.0, -0.1, (("mine", "reference"),), 0.0, error=0.05)  # against a reference
    store.settled([("d", vouched), ("d", vouched)])
    d = CampaignStore(tmp_path / "campaigns.db").peer_records()["d"]
    assert astuple(d.referenced) == pytest.approx(astuple(ReferenceOffsets(2.0, -80.0, 800.0)))
    assert d.referenced.mean == pytest.approx(-0.1)


def test_records_decay_with_their_half_life_from_their_last_update(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.db")
    t0 = 1.8e9
    store.settled([("p", against(t0)), ("p", against(t0))])
    assert store.peer_records()["p"].disagreed == 2
    later = store.peer_records(t0 + HALF_LIFE_S)["p"]
    assert later.disagreed == pytest.approx(1.0)
    assert later.witnesses[0].against == pytest.approx(1.0)
    store.settled([("p", agreed(t0 + 2 * HALF_LIFE_S))])  # decayed to its time, then added
    assert store.peer_records()["p"].disagreed == pytest.approx(0.5)
    assert store.peer_records()["p"].updated == t0 + 2 * HALF_LIFE_S


def test_an_old_store_gains_the_new_columns_and_its_records_count_on(tmp_path: Path) -> None:
    path = tmp_path / "campaigns.db"
    with sqlite3.connect(path) as db:  # a store from before offsets, decay and witnesses were kept
        db.execute(
            "CREATE TABLE peer_records (peer_id TEXT PRIMARY KEY, agreed INTEGER NOT NULL, "
            "disagreed INTEGER NOT NULL, streak INTEGER NOT NULL)"
        )
        db.execute("INSERT INTO peer_records VALUES ('old', 3, 0, 3)")
    db.close()
    store = CampaignStore(path)
    assert store.peer_records(1.9e9) == {"old": PeerRecord(agreed=3, disagreed=0, streak=3)}  # never decayed
    store.settled([("old", agreed(1.0, 0.1)), ("liar", agreed(1.0, -0.1))])
    store.settled([("liar", agreed(1.0, -0.2)), ("old", against(1.0, 0.3, weight=0.0))])
    records = CampaignStore(path).peer_records()
    old = records["old"]
    assert (old.agreed, old.disagreed, old.streak, old.offsets) == (4, 0, 4, 1)
    assert old.offset == pytest.approx(0.1)
    assert [(w.peer_id, w.overruled) for w in old.witnesses] == [("p", 0), ("s1", 1), ("s2", 1)]
    liar = records["liar"]
    assert liar.offsets == 2
    assert liar.offset == pytest.approx(-0.15)


def test_class_pools_keep_the_last_honest_errors_across_reopened_stores(tmp_path: Path) -> None:
    path = tmp_path / "campaigns.db"
    store = CampaignStore(path)
    assert store.class_errors() == {}
    store.add_errors("cls-a/m", [0.5, 0.6])
    store.add_errors("cls-b/m", [0.05])
    store.add_errors("cls-a/m", [])  # a group with no agreeing replica adds nothing
    store.add_errors("cls-a/m", [float("nan"), float("inf")])  # never a number that is not one
    assert CampaignStore(path).class_errors() == {"cls-a/m": (0.5, 0.6), "cls-b/m": (0.05,)}
    store.add_errors("cls-a/m", [0.001 * k for k in range(POOL_KEEP + 5)])
    kept = CampaignStore(path).class_errors()["cls-a/m"]
    assert len(kept) == POOL_KEEP  # the oldest go first
    assert kept[-1] == pytest.approx(0.001 * (POOL_KEEP + 4))
    assert not {0.5, 0.6} & set(kept)
