"""The submitter's campaign store: SQLite, written as results arrive, so a campaign survives a crash.

A result is kept as what it is made of, never as rendered text: the worker's signed envelope, its raw
samples, the measurement the submitter derived from its raw parts when it accepted it, and when it was
received. Every output rebuilds its rows from these (`node.submitter.outputs`). A store written before
the derived measurement was kept still opens: those results keep a text row in the `row` column, which
nothing reads but its `CreatedUtc`; their figures are derived again from the envelope. Each campaign
keeps its secret draw key (`secret`: 32 random bytes made when it is created, read by nothing but its
scheduler, never sent, never in a snapshot or an output), so a resumed campaign draws its spot checks as
it began. The offer spec of a fleet member (its signed deal) or of a lone open loop (its schedule's
seed) is kept too, so that a lease reclaimed after a restart is checked against the schedule that worker
was given, and so is what the submitter measured of each load's server (`floorbooks`), so that it is held
to the floor and the count of the job's own start.
"""

from __future__ import annotations

import enum
import json
import math
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psutil

from node.errors import disk_errors
from node.submitter.schema import RECORD_COLUMNS, create, record_of, record_row
from scheduler.verification import POOL_KEEP, Evidence, PeerRecord


def utc_now() -> str:
    """The current time as the store and the CSV's CreatedUtc column write it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CampaignStatus(enum.StrEnum):
    """Where a stored campaign is: its `status` column."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    """A submitter's loop stopped on an internal error (the HTTP server keeps serving)."""
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C with its offers and leases withdrawn; `submit --resume` goes on."""
    CANCELLED = "cancelled"
    """Ended by `sark-node cancel` (or the HTTP API's cancel): its tasks were cancelled on their workers."""


SUBMITTER_GONE: Final = "running (submitter gone)"
"""The status shown for a campaign stored `running` whose submitter process no longer exists."""


@dataclass(frozen=True)
class Submitter:
    """The process that runs a campaign: what `status` needs to tell whether it is still there.

    A pid alone is reused; the pid with its process's start time (seconds since the epoch, as the
    kernel reports it) names one process on one boot, and the host says whose pid it is.
    """

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Submitter:
        """This process, as a campaign's submitter."""
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())

    def gone(self) -> bool | None:
        """Whether the process has ended: True when no process on this host has its pid and start
        time; None when it ran on another host (a store on a shared disk), where this cannot tell."""
        if self.host != socket.gethostname():
            return None
        try:
            started = psutil.Process(self.pid).create_time()
        except psutil.Error:  # no such process (or one we may not look at: then not ours)
            return True
        return abs(started - self.started) > 1.0  # the pid was reused by a later process


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
    swarm: tuple[str, ...] | None = None
    """The gates it last ran on, or (`EMBEDDED`,); None for a campaign stored before this was recorded."""
    submitter: Submitter | None = None
    """The process that last ran it (None: never run, or stored before this was recorded)."""
    secret: bytes | None = field(default=None, repr=False)
    """Its draw key (`scheduler.DrawKey`); None for a campaign stored before keys were kept."""

    def shown_status(self) -> str:
        """The status as `sark-node status` shows it: the stored one, except a campaign stored
        `running` whose submitter process has ended (SIGKILL, a crash, a power cut):
        "running (submitter gone)". `submit --resume` goes on with either."""
        if self.status == CampaignStatus.RUNNING and self.submitter is not None and self.submitter.gone():
            return SUBMITTER_GONE
        return self.status.value


@dataclass(frozen=True)
class ResultRecord:
    """One task's accepted result as the submitter stored it.

    Attributes:
        envelope: the worker's signed envelope (`outputs.pack_envelope`).
        samples: the raw inference samples (ms).
        derived: the measurement the submitter derived from the envelope's raw parts
            (`outputs.pack_measurement`); None for a result stored before it was kept.
        received: when it was stored (ISO 8601): its rows' CreatedUtc.
        witness: what the submitter saw of a load's server when it accepted the result
            (`scheduler.results.bundle.ServerWitness` as JSON; None: no floor and no count).
    """

    task_id: str
    lease_id: str
    peer_id: str
    status: str
    envelope: bytes | None
    samples: tuple[float, ...]
    derived: bytes | None = None
    received: str = ""
    witness: bytes | None = None


class CampaignStore:
    """A small SQLite database under the node's data directory."""

    def __init__(self, path: Path) -> None:
        self._path = path
        with disk_errors(path.parent, "creating the campaign store"):
            path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            create(db)

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
                f"INSERT INTO campaigns ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    None if record.swarm is None else json.dumps(list(record.swarm)),
                    None if record.submitter is None else json.dumps(asdict(record.submitter)),
                    record.secret,
                ),
            )

    def keep_secret(self, campaign_id: str, secret: bytes) -> None:
        """Give a campaign stored before keys were kept its draw key (once: a kept key stays)."""
        with self._connect() as db:
            db.execute(
                "UPDATE campaigns SET secret = ? WHERE id = ? AND secret IS NULL", (secret, campaign_id)
            )

    def claim(self, campaign_id: str, swarm: tuple[str, ...], submitter: Submitter) -> None:
        """Record that `submitter` now runs the campaign on `swarm` (a start, or a resume)."""
        with self._connect() as db:
            db.execute(
                "UPDATE campaigns SET swarm = ?, submitter = ? WHERE id = ?",
                (json.dumps(list(swarm)), json.dumps(asdict(submitter)), campaign_id),
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
            row = db.execute(f"SELECT {_COLUMNS} FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        return None if row is None else _campaign(row)

    def campaigns(self) -> list[CampaignRecord]:
        """Every stored campaign, newest first."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM campaigns ORDER BY created_utc DESC").fetchall()
        return [_campaign(r) for r in rows]

    def put_result(self, campaign_id: str, result: ResultRecord) -> bool:
        """Store a task's outcome once; False if the task already has one (nothing is overwritten)."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO results (campaign_id, task_id, lease_id, peer_id, status, "
                "envelope, row, samples, received, derived, witness) "
                "VALUES (?, ?, ?, ?, ?, ?, '{}', ?, ?, ?, ?)",
                (
                    campaign_id,
                    result.task_id,
                    result.lease_id,
                    result.peer_id,
                    result.status,
                    result.envelope,
                    json.dumps(list(result.samples)),
                    result.received,
                    result.derived,
                    result.witness,
                ),
            )
            return cur.rowcount == 1

    def results(self, campaign_id: str) -> list[ResultRecord]:
        """Every stored outcome of a campaign, in task order."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT task_id, lease_id, peer_id, status, envelope, samples, derived, received, row, "
                "witness FROM results WHERE campaign_id = ? ORDER BY task_id",
                (campaign_id,),
            ).fetchall()
        return [
            ResultRecord(
                r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], _received(r[7], r[8]), r[9]
            )
            for r in rows
        ]

    def put_floorbook(self, campaign_id: str, job_index: int, state: str) -> None:
        """Keep what the submitter measured of a job's server and the claims accepted against it
        (`node.submitter.floors.FloorBook`'s state, JSON), replacing what was kept before."""
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO floorbooks (campaign_id, job_index, state) VALUES (?, ?, ?)",
                (campaign_id, job_index, state),
            )

    def floorbooks(self, campaign_id: str) -> dict[int, str]:
        """Each job's kept `FloorBook` state, by job index (none for a campaign that kept none)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT job_index, state FROM floorbooks WHERE campaign_id = ?", (campaign_id,)
            ).fetchall()
        return {int(job): str(state) for job, state in rows}

    def peer_records(self, now: float = 0.0) -> dict[str, PeerRecord]:
        """Each peer's record of replicated results across campaigns (`scheduler.verification.reputation`),
        as it stands at `now` (`PeerRecord.decayed`; 0: as stored)."""
        with self._connect() as db:
            rows = db.execute(f"SELECT peer_id, {RECORD_COLUMNS} FROM peer_records").fetchall()
        return {r[0]: record_of(r[1:]).decayed(now) for r in rows}

    def settled(self, evidence: Iterable[tuple[str, Evidence]]) -> None:
        """A replica group settled: each peer's record after what the group says of it
        (`PeerRecord.after`), in one transaction."""
        with self._connect() as db:
            for peer, ev in evidence:
                row = db.execute(
                    f"SELECT {RECORD_COLUMNS} FROM peer_records WHERE peer_id = ?", (peer,)
                ).fetchone()
                record = (record_of(row) if row else PeerRecord()).after(ev)
                db.execute(
                    f"INSERT OR REPLACE INTO peer_records (peer_id, {RECORD_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (peer, *record_row(record)),
                )

    def class_errors(self) -> dict[str, tuple[float, ...]]:
        """Each class's pool (`scheduler.state.settling.pool_key`): the process errors of its honest
        replicas across campaigns, oldest first, the last `POOL_KEEP` of each (the bands' spread)."""
        with self._connect() as db:
            rows = db.execute("SELECT pool, error FROM class_errors ORDER BY n").fetchall()
        pools: dict[str, list[float]] = {}
        for pool, error in rows:
            pools.setdefault(pool, []).append(error)
        return {pool: tuple(errors[-POOL_KEEP:]) for pool, errors in pools.items()}

    def add_errors(self, pool: str, errors: Iterable[float]) -> None:
        """Add a settled group's agreeing replicas' process errors to their class's pool, keeping
        its last `POOL_KEEP`."""
        values = [(pool, e) for e in errors if math.isfinite(e)]
        if not values:
            return
        with self._connect() as db:
            db.executemany("INSERT INTO class_errors (pool, error) VALUES (?, ?)", values)
            db.execute(
                "DELETE FROM class_errors WHERE pool = ? AND n NOT IN "
                "(SELECT n FROM class_errors WHERE pool = ? ORDER BY n DESC LIMIT ?)",
                (pool, pool, POOL_KEEP),
            )

    def put_offer(self, campaign_id: str, task_id: str, peer_id: str, spec: bytes) -> None:
        """Keep the spec a task was offered to a peer with (its deal or its open loop's seed)."""
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO offers VALUES (?, ?, ?, ?)", (campaign_id, task_id, peer_id, spec)
            )

    def offer(self, campaign_id: str, task_id: str, peer_id: str) -> bytes | None:
        """The spec last offered to `peer_id` for the task, if one was kept."""
        with self._connect() as db:
            row = db.execute(
                "SELECT spec FROM offers WHERE campaign_id = ? AND task_id = ? AND peer_id = ?",
                (campaign_id, task_id, peer_id),
            ).fetchone()
        return None if row is None else bytes(row[0])

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
            db.execute("DELETE FROM offers")
            db.execute("DELETE FROM campaigns")


_COLUMNS: Final = (
    "id, name, created_utc, source, text, models, snapshot, status, out_dir, swarm, submitter, secret"
)


def _received(received: str, legacy_row: str) -> str:
    """When a result was stored: a result kept with a text row (an older store) keeps that row's
    CreatedUtc, the one its files were first written with."""
    if legacy_row in ("", "{}"):
        return received
    created = json.loads(legacy_row).get("CreatedUtc", "")
    return created if isinstance(created, str) and created else received


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
        swarm=None if row[9] is None else tuple(json.loads(row[9])),
        submitter=None if row[10] is None else Submitter(**json.loads(row[10])),
        secret=None if row[11] is None else bytes(row[11]),
    )
