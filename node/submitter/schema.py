"""The campaign store's SQLite schema, and how a store written by an older sark-node is brought to it.

`create` runs on every open: the tables `IF NOT EXISTS`, then the columns added since (`ADDED_COLUMNS`),
each NULL or its default for the rows an older store holds, so a store is never rewritten or lost.
A peer's record is one row (`record_row`, `record_of`): its counts, when it was last updated (0 for
a record from before that was kept: it decays from its next update on), its witnesses and its
offsets against reference devices as JSON.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import astuple
from typing import Any, Final

from scheduler.verification import PeerRecord, ReferenceOffsets, Witness

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS campaigns (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    source      TEXT NOT NULL,
    text        TEXT NOT NULL,
    models      TEXT NOT NULL,
    snapshot    BLOB,
    status      TEXT NOT NULL,
    out_dir     TEXT NOT NULL DEFAULT '',
    swarm       TEXT,
    submitter   TEXT,
    secret      BLOB
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
    derived     BLOB,
    witness     BLOB,
    PRIMARY KEY (campaign_id, task_id)
);
CREATE TABLE IF NOT EXISTS peer_records (
    peer_id     TEXT PRIMARY KEY,
    agreed      INTEGER NOT NULL,
    disagreed   INTEGER NOT NULL,
    streak      INTEGER NOT NULL,
    offsets     INTEGER NOT NULL DEFAULT 0,
    offset_sum  REAL NOT NULL DEFAULT 0,
    offset_squares REAL NOT NULL DEFAULT 0,
    updated     REAL NOT NULL DEFAULT 0,
    witnesses   TEXT NOT NULL DEFAULT '[]',
    referenced  TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS class_errors (
    n           INTEGER PRIMARY KEY AUTOINCREMENT,
    pool        TEXT NOT NULL,
    error       REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS offers (
    campaign_id TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    peer_id     TEXT NOT NULL,
    spec        BLOB NOT NULL,
    PRIMARY KEY (campaign_id, task_id, peer_id)
);
CREATE TABLE IF NOT EXISTS floorbooks (
    campaign_id TEXT NOT NULL,
    job_index   INTEGER NOT NULL,
    state       TEXT NOT NULL,
    PRIMARY KEY (campaign_id, job_index)
);
CREATE TABLE IF NOT EXISTS cancels (
    campaign_id TEXT PRIMARY KEY,
    requested   TEXT NOT NULL
);
"""
ADDED_COLUMNS: Final = (
    ("campaigns", "swarm", "TEXT"),
    ("campaigns", "submitter", "TEXT"),
    ("campaigns", "secret", "BLOB"),
    ("results", "derived", "BLOB"),
    ("results", "witness", "BLOB"),
    ("peer_records", "offsets", "INTEGER NOT NULL DEFAULT 0"),
    ("peer_records", "offset_sum", "REAL NOT NULL DEFAULT 0"),
    ("peer_records", "offset_squares", "REAL NOT NULL DEFAULT 0"),
    ("peer_records", "updated", "REAL NOT NULL DEFAULT 0"),
    ("peer_records", "witnesses", "TEXT NOT NULL DEFAULT '[]'"),
    ("peer_records", "referenced", "TEXT NOT NULL DEFAULT '[]'"),
)
"""Columns a store written by an older sark-node lacks (table, name, kind): added on open, NULL
(or their default) for what it holds."""


def create(db: sqlite3.Connection) -> None:
    """Bring the store open on `db` to the schema: the tables it lacks, then the columns."""
    db.executescript(SCHEMA)
    _add_columns(db)


def _add_columns(db: sqlite3.Connection) -> None:
    """Give a store written by an older sark-node the columns it lacks (`ADDED_COLUMNS`)."""
    for table, name, kind in ADDED_COLUMNS:
        if name in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            continue
        try:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:  # another process opening the store added it first
            if "duplicate column" not in str(exc):
                raise


RECORD_COLUMNS: Final = (
    "agreed, disagreed, streak, offsets, offset_sum, offset_squares, updated, witnesses, referenced"
)
"""A `PeerRecord`'s columns, in its fields' order."""


def record_row(record: PeerRecord) -> tuple[Any, ...]:
    """A record as its columns' values (`RECORD_COLUMNS`), its witnesses and its offsets against
    reference devices (`ReferenceOffsets`' sums) as JSON."""
    witnesses = json.dumps([astuple(w) for w in record.witnesses])
    return (*astuple(record)[:7], witnesses, json.dumps(astuple(record.referenced)))


def record_of(row: tuple[Any, ...]) -> PeerRecord:
    """A record from its columns' values (`RECORD_COLUMNS`); witnesses or offsets against
    references that do not parse are none (the counts stand)."""
    try:
        witnesses = tuple(Witness(str(w[0]), str(w[1]), *map(float, w[2:5])) for w in json.loads(row[7]))
    except (ValueError, TypeError, IndexError):
        witnesses = ()
    try:
        sums = [float(v) for v in json.loads(row[8])] if len(row) > 8 else []
        referenced = ReferenceOffsets(*sums[:3]) if len(sums) == 3 else ReferenceOffsets()
    except (ValueError, TypeError):
        referenced = ReferenceOffsets()
    agreed, disagreed, streak, offsets, total, squares, updated = (float(v) for v in row[:7])
    return PeerRecord(agreed, disagreed, streak, offsets, total, squares, updated, witnesses, referenced)
