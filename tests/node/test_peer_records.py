"""The submitter's store keeps each peer's record of replicated results across campaigns."""

from __future__ import annotations

from pathlib import Path

from node.submitter.store import CampaignStore
from scheduler.reputation import PeerRecord


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
