"""The submitter's campaign store: SQLite, written as results arrive, so a campaign survives a crash."""

from __future__ import annotations

import enum
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from node.errors import disk_errors
from scheduler.reputation import PeerRecord

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS campaigns (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    source      TEXT NOT NULL,
    text        TEXT NOT NULL,
    models      TEXT NOT NULL,
    snapshot    BLOB,
    status      TEXT NOT NULL,
    out_dir     TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS results (
    campaign_id TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    lease_id    TEXT NOT NULL,
    peer_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    envelope    BLOB,
    row         TEXT NOT NULL,
    samples     TEXT NOT NULL,
    received    TEXT NOT NULL,
    PRIMARY KEY (campaign_id, task_id)
);
CREATE TABLE IF NOT EXISTS peer_records (
    peer_id     TEXT PRIMARY KEY,
    agreed      INTEGER NOT NULL,
    disagreed   INTEGER NOT NULL,
    streak      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cancels (
    campaign_id TEXT PRIMARY KEY,
    requested   TEXT NOT NULL
);
"""


class CampaignStatus(enum.StrEnum):
    """Where a stored campaign is: its `status` column."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    """A submitter's loop stopped on an internal error (the HTTP server keeps serving)."""
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C with its offers and leases withdrawn; `submit --resume` goes on."""


@dataclass(frozen=True)
class CampaignRecord:
    """One stored campaign: what was asked, the pinned models, and where the scheduler was."""

    campaign_id: str
    name: str
    created_utc: str
    source: str
    text: str
    models: Mapping[str, Any]
    snapshot: bytes | None
    status: CampaignStatus
    out_dir: str


@dataclass(frozen=True)
class ResultRecord:
    """One task's final outcome as the submitter stored it."""

    task_id: str
    lease_id: str
    peer_id: str
    status: str
    envelope: bytes | None
    row: Mapping[str, str]
    samples: tuple[float, ...]


class CampaignStore:
    """A small SQLite database under the node's data directory."""

    def __init__(self, path: Path) -> None:
        self._path = path
        with disk_errors(path.parent, "creating the campaign store"):
            path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose block is one transaction: all of it is stored, or (a full disk:
        `DiskFull`) none of it."""
        with (
            disk_errors(self._path.parent, f"writing the campaign store {self._path.name}"),
            closing(sqlite3.connect(self._path, timeout=10.0)) as db,
        ):
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            with db:
                yield db

    def add_campaign(self, record: CampaignRecord) -> None:
        """Store a new campaign (its id must be new)."""
        with self._connect() as db:
            db.execute(
                "INSERT INTO campaigns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.campaign_id,
                    record.name,
                    record.created_utc,
                    record.source,
                    record.text,
                    json.dumps(dict(record.models)),
                    record.snapshot,
                    record.status,
                    record.out_dir,
                ),
            )

    def save_state(self, campaign_id: str, snapshot: bytes, status: CampaignStatus) -> None:
        """Record where the scheduler is, so a restarted submitter resumes from here."""
        with self._connect() as db:
            db.execute(
                "UPDATE campaigns SET snapshot = ?, status = ? WHERE id = ?", (snapshot, status, campaign_id)
            )

    def campaign(self, campaign_id: str) -> CampaignRecord | None:
        """One campaign, or None if this store never saw it."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        return None if row is None else _campaign(row)

    def campaigns(self) -> list[CampaignRecord]:
        """Every stored campaign, newest first."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM campaigns ORDER BY created_utc DESC").fetchall()
        return [_campaign(r) for r in rows]

    def put_result(self, campaign_id: str, result: ResultRecord, received_utc: str) -> bool:
        """Store a task's outcome once; False if the task already has one (nothing is overwritten)."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    campaign_id,
                    result.task_id,
                    result.lease_id,
                    result.peer_id,
                    result.status,
                    result.envelope,
                    json.dumps(dict(result.row)),
                    json.dumps(list(result.samples)),
                    received_utc,
                ),
            )
            return cur.rowcount == 1

    def results(self, campaign_id: str) -> list[ResultRecord]:
        """Every stored outcome of a campaign, in task order."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT task_id, lease_id, peer_id, status, envelope, row, samples FROM results "
                "WHERE campaign_id = ? ORDER BY task_id",
                (campaign_id,),
            ).fetchall()
        return [
            ResultRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), tuple(json.loads(r[6])))
            for r in rows
        ]

    def peer_records(self) -> dict[str, PeerRecord]:
        """Each peer's record of replicated results (`scheduler.reputation`), across campaigns."""
        with self._connect() as db:
            rows = db.execute("SELECT peer_id, agreed, disagreed, streak FROM peer_records").fetchall()
        return {r[0]: PeerRecord(agreed=r[1], disagreed=r[2], streak=r[3]) for r in rows}

    def settled(self, agreed: Iterable[str], outliers: Iterable[str]) -> None:
        """A replica group settled: one agreement for each `agreed` peer, one disagreement for each
        outlier, in one transaction."""
        with self._connect() as db:
            for peer, ok in [*((p, True) for p in agreed), *((p, False) for p in outliers)]:
                row = db.execute(
                    "SELECT agreed, disagreed, streak FROM peer_records WHERE peer_id = ?", (peer,)
                ).fetchone()
                record = (PeerRecord(*row) if row else PeerRecord()).after(ok)
                db.execute(
                    "INSERT OR REPLACE INTO peer_records VALUES (?, ?, ?, ?)",
                    (peer, record.agreed, record.disagreed, record.streak),
                )

    def request_cancel(self, campaign_id: str, requested_utc: str) -> None:
        """Ask whoever runs the campaign (now or on resume) to cancel it."""
        with self._connect() as db:
            db.execute("INSERT OR IGNORE INTO cancels VALUES (?, ?)", (campaign_id, requested_utc))

    def cancel_requested(self, campaign_id: str) -> bool:
        """Whether `sark-node cancel` was asked for this campaign."""
        with self._connect() as db:
            row = db.execute("SELECT 1 FROM cancels WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return row is not None

    def clear(self) -> None:
        """Forget every campaign and result (the HTTP API's reset)."""
        with self._connect() as db:
            db.execute("DELETE FROM results")
            db.execute("DELETE FROM cancels")
            db.execute("DELETE FROM campaigns")


def _campaign(row: tuple[Any, ...]) -> CampaignRecord:
    return CampaignRecord(
        campaign_id=row[0],
        name=row[1],
        created_utc=row[2],
        source=row[3],
        text=row[4],
        models=json.loads(row[5]),
        snapshot=row[6],
        status=CampaignStatus(row[7]),
        out_dir=row[8],
    )
