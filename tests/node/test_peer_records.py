"""The submitter's store keeps each peer's record of replicated results across campaigns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from node.submitter.store import CampaignStore
from scheduler.verification import POOL_KEEP, PeerRecord


def test_settled_groups_add_up_per_peer_and_survive_a_reopened_store(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.db")
    assert store.peer_records() == {}
    store.settled(["a", "b"], ["liar"])
    store.settled(["a", "c"], ["b"])
    records = CampaignStore(tmp_path / "campaigns.db").peer_records()
    assert records == {
        "a": PeerRecord(agreed=2, disagreed=0, streak=2),
        "b": PeerRecord(agreed=1, disagreed=1, streak=0),
        "c": PeerRecord(agreed=1, disagreed=0, streak=1),
        "liar": PeerRecord(agreed=0, disagreed=1, streak=0),
    }


def test_offsets_add_up_in_the_store_and_an_old_store_gains_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "campaigns.db"
    with sqlite3.connect(path) as db:  # a store from before offsets were kept
        db.execute(
            "CREATE TABLE peer_records (peer_id TEXT PRIMARY KEY, agreed INTEGER NOT NULL, "
            "disagreed INTEGER NOT NULL, streak INTEGER NOT NULL)"
        )
        db.execute("INSERT INTO peer_records VALUES ('old', 3, 0, 3)")
    db.close()
    store = CampaignStore(path)
    assert store.peer_records() == {"old": PeerRecord(agreed=3, disagreed=0, streak=3)}
    store.settled(["old", "liar"], [], [("old", 0.1), ("liar", -0.1)])
    store.settled(["liar"], ["old"], [("liar", -0.2)])
    records = CampaignStore(path).peer_records()
    assert records["old"] == PeerRecord(4, 1, 0, offsets=1, offset_sum=0.1, offset_squares=0.1 * 0.1)
    liar = records["liar"]
    assert (liar.offsets, liar.offset) == (2, pytest.approx(-0.15))


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
