"""What `peers` shows of the submitter's records (`scheduler.verification.reputation`): for each
peer its store has seen in replicated results, its standing, and when it is distrusted why and on
whose evidence (partner ids, their networks, weights).

The store is the data folder's (`--data-dir`, `SARK_DATA_DIR` or the default), read only when it
exists (`peers` never creates one); records are shown as they stand now (`PeerRecord.decayed`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.verification import PeerRecord


def record_rows(store_path: Path) -> list[dict[str, Any]]:
    """Each stored record as a JSON row, the distrusted first; [] when there is no store."""
    if not store_path.is_file():
        return []
    from node.submitter.store import CampaignStore

    records = CampaignStore(store_path).peer_records(time.time())
    rows = [_row(peer, r) for peer, r in records.items()]
    return sorted(rows, key=lambda r: (not r["distrusted"], r["peer_id"]))


def _row(peer: str, r: PeerRecord) -> dict[str, Any]:
    def named(kind: str) -> list[dict[str, Any]]:
        those = [w for w in r.witnesses if getattr(w, kind) > 0]
        return [
            {"peer_id": w.peer_id, "network": w.network, "weight": round(getattr(w, kind), 3)} for w in those
        ]

    state = "distrusted" if r.distrusted else "spot-checked" if r.trusted else "checked every task"
    return {
        "peer_id": peer,
        "state": state,
        "distrusted": r.distrusted,
        "why": r.why_distrusted(),
        "agreed": round(r.agreed, 3),
        "disagreed": round(r.disagreed, 3),
        "streak": round(r.streak, 3),
        "offset": None if r.offset is None else round(r.offset, 4),
        "against": named("against"),
        "overruled": named("overruled"),
        "compared": named("compared"),
    }


def print_records(rows: list[dict[str, Any]]) -> None:
    """The records as a table: peer, state, counts, and why and on whose evidence."""
    if not rows:
        return
    from rich.table import Table

    from node.cli.console import console as out_console
    from protocol import for_rich

    table = Table("peer id", "record", "agreed", "counted against", "why, and on whose evidence")
    table.columns[0].no_wrap = True
    for r in rows:
        said = [r["why"]] if r["why"] else []
        said += [_evidence("against it", r["against"])] if r["against"] and not r["why"] else []
        said += [_evidence("overruled (not independent)", r["overruled"])] if r["overruled"] else []
        table.add_row(
            for_rich(r["peer_id"]),
            r["state"],
            f"{r['agreed']:g}",
            f"{r['disagreed']:g}",
            for_rich("; ".join(said) or "-"),
        )
    out_console().print(table)


def _evidence(label: str, witnesses: list[dict[str, Any]]) -> str:
    said = ", ".join(
        f"{w['peer_id']} ({w['network'] or 'no known network'}) {w['weight']:g}" for w in witnesses
    )
    return f"{label}: {said}"
