"""Each campaign's secret draw key: made when it is stored, kept by the store, never in a snapshot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import scheduler as sch
from node.submitter.run import NewCampaign, restore, start
from node.submitter.store import CampaignStore
from protocol import ModelRef
from scheduler.verification import Purpose

SHA = "ab" * 32
MODEL = ModelRef(name="m.onnx", size=1024, sha256=SHA, sources=("https://example.org/m.onnx",))
TEXT = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{spot_check: 0.5}}
jobs: [{{compute_unit: CPU (ONNX), devices: all}}]
"""


def new_campaign() -> NewCampaign:
    campaign = sch.parse_campaign(TEXT)
    return NewCampaign(campaign, {m.key: MODEL for m in campaign.models}, TEXT, "c.yaml")


def test_a_campaign_gets_its_own_random_key_kept_by_the_store_and_nowhere_else(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    one, two = start(store, new_campaign(), tmp_path), start(store, new_campaign(), tmp_path)
    kept = store.campaign(one.campaign_id)
    assert kept is not None
    assert kept.secret is not None
    assert len(kept.secret) == sch.SECRET_BYTES
    other = store.campaign(two.campaign_id)
    assert other is not None
    assert other.secret not in (None, kept.secret)
    assert kept.secret.hex() not in repr(kept)
    snapshot = one.scheduler.snapshot().model_dump_json().encode()
    assert kept.secret not in snapshot
    assert kept.secret.hex().encode() not in snapshot
    store.save_state(one.campaign_id, snapshot, kept.status)
    reopened = CampaignStore(tmp_path / "campaigns.sqlite").campaign(one.campaign_id)
    assert reopened is not None
    assert reopened.secret == kept.secret  # a resumed campaign draws as it began
    assert restore(reopened).scheduler.snapshot() == one.scheduler.snapshot()
    key = sch.DrawKey(kept.secret)
    assert key.draw(Purpose.SPOT_CHECK, "t") == sch.DrawKey(reopened.secret).draw(Purpose.SPOT_CHECK, "t")


def test_a_campaign_stored_before_keys_were_kept_gets_one_once(tmp_path: Path) -> None:
    path = tmp_path / "campaigns.sqlite"
    store = CampaignStore(path)
    run = start(store, new_campaign(), tmp_path)
    with sqlite3.connect(path) as db:  # as an older sark-node stored it
        db.execute("UPDATE campaigns SET secret = NULL")
    db.close()
    assert (store.campaign(run.campaign_id) or run.record).secret is None
    store.keep_secret(run.campaign_id, b"k" * sch.SECRET_BYTES)
    store.keep_secret(run.campaign_id, b"z" * sch.SECRET_BYTES)  # a kept key stays
    assert (store.campaign(run.campaign_id) or run.record).secret == b"k" * sch.SECRET_BYTES
