"""Issue 30: the store records the swarm a campaign ran on and the process running it; `--resume`
goes back to that swarm or refuses another; a store from an older sark-node opens and is read safely."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from node.config import EMBEDDED, NodeConfig
from node.p2p.identity import identity_peer_id
from node.submitter.store import (
    SUBMITTER_GONE,
    CampaignRecord,
    CampaignStatus,
    CampaignStore,
    Submitter,
)
from node.submitter.swarms import SwarmMismatch, SwarmUnknown, resume_config

GATE = "/ip4/10.0.0.1/tcp/4001/p2p/12D3KooWGzBXRwmwgv8WXnbQqbu9KvaNmSwgGAVjRkBYCxcW35MA"
OTHER = "/ip4/10.0.0.2/tcp/4001/p2p/12D3KooWGzBXRwmwgv8WXnbQqbu9KvaNmSwgGAVjRkBYCxcW35MA"


def _record(swarm: tuple[str, ...] | None = None, submitter: Submitter | None = None) -> CampaignRecord:
    return CampaignRecord(
        "campaign-1",
        "c",
        "2026-11-23T10:00:00Z",
        "c.yaml",
        "",
        {},
        None,
        CampaignStatus.RUNNING,
        "",
        swarm,
        submitter,
    )


def test_the_store_keeps_the_swarm_and_the_submitter(tmp_path: Path) -> None:
    store = CampaignStore(tmp_path / "campaigns.sqlite")
    store.add_campaign(_record())
    assert store.campaign("campaign-1") == _record()  # not yet run: nothing recorded
    me = Submitter.this_process()
    store.claim("campaign-1", (GATE,), me)
    record = store.campaign("campaign-1")
    assert record is not None
    assert (record.swarm, record.submitter) == ((GATE,), me)
    assert record.shown_status() == "running"  # this process runs it


def test_a_store_from_an_older_sark_node_opens_without_the_record(tmp_path: Path) -> None:
    path = tmp_path / "campaigns.sqlite"
    with sqlite3.connect(path) as db:  # the schema before issue 30: no swarm, no submitter
        db.execute(
            "CREATE TABLE campaigns (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_utc TEXT NOT NULL, "
            "source TEXT NOT NULL, text TEXT NOT NULL, models TEXT NOT NULL, snapshot BLOB, "
            "status TEXT NOT NULL, out_dir TEXT NOT NULL DEFAULT '')"
        )
        db.execute(
            "INSERT INTO campaigns VALUES ('campaign-0', 'old', 't', 's', '', '{}', NULL, 'running', '')"
        )
    record = CampaignStore(path).campaign("campaign-0")
    assert record is not None
    assert (record.swarm, record.submitter, record.shown_status()) == (None, None, "running")


def test_a_killed_submitter_reads_as_gone_and_a_reused_pid_too(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = Submitter(Submitter.this_process().host, child.pid, psutil.Process(child.pid).create_time())
        assert alive.gone() is False
        assert _record(submitter=alive).shown_status() == "running"
        reused = Submitter(alive.host, child.pid, alive.started - 3600.0)  # the same pid, an older process
        assert reused.gone() is True
    finally:
        child.kill()
        child.wait()
    assert alive.gone() is True
    assert _record(submitter=alive).shown_status() == SUBMITTER_GONE
    elsewhere = Submitter("another-host.invalid", child.pid, alive.started)
    assert elsewhere.gone() is None  # another machine's pid: cannot tell, shown as stored
    assert _record(submitter=elsewhere).shown_status() == "running"


def test_resume_goes_back_to_the_recorded_gates_and_refuses_another_configured_one(tmp_path: Path) -> None:
    bare = NodeConfig(data_dir=tmp_path)
    assert resume_config(_record((GATE,)), bare, [], explicit=False).gates == (GATE,)
    assert resume_config(_record((EMBEDDED,)), bare, [], explicit=False).gates == ()  # the embedded swarm
    configured = bare.with_(gates=(OTHER,))
    with pytest.raises(SwarmMismatch) as refused:
        resume_config(_record((GATE,)), configured, [], explicit=False)
    assert GATE in refused.value.detail
    assert OTHER in refused.value.detail
    with pytest.raises(SwarmMismatch, match="embedded"):
        resume_config(_record((EMBEDDED,)), configured, [], explicit=False)
    assert resume_config(_record((GATE,)), configured, [], explicit=True).gates == (OTHER,)  # --gate moves it


def test_an_old_campaign_resumes_on_the_embedded_swarm_only_when_its_workers_ran_it(tmp_path: Path) -> None:
    bare = NodeConfig(data_dir=tmp_path)
    local = identity_peer_id(bare.data.embedded("worker-0") / "identity.key")  # the embedded worker's id
    assert resume_config(_record(), bare, [local], explicit=False).gates == ()
    with pytest.raises(SwarmUnknown, match="outside this machine"):
        resume_config(_record(), bare, [local, "12D3KooWfleet"], explicit=False)
    with pytest.raises(SwarmUnknown, match="no worker took a task"):
        resume_config(_record(), bare, [], explicit=False)
    configured = bare.with_(gates=(GATE,))
    assert resume_config(_record(), configured, ["12D3KooWfleet"], explicit=False).gates == (GATE,)
    with pytest.raises(SwarmMismatch):  # it ran on the embedded swarm: a configured gate is another one
        resume_config(_record(), configured, [local], explicit=False)
