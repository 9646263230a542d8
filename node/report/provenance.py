"""Where each row came from, in report.html: the swarm the campaign ran on, the worker that measured
it, its signature, how it was verified (replicas, the networks and owners of their quorum), its device
class and claim mark, and why a task that did not run did not. Presentation only: who and how are read from
each row's text (the registry's cells), every string through the HTML seam.
"""

from __future__ import annotations

from node.config import named
from protocol import for_html
from scheduler.results import CampaignReport

_HEAD = (
    "task",
    "device · unit",
    "worker",
    "signature",
    "verified",
    "quorum networks",
    "quorum owners",
    "device class",
    "claim",
)


def _cells(row: dict[str, str]) -> tuple[str, ...]:
    worker = row.get("WorkerPeerId", "")
    return (
        row.get("JobId", "").rpartition("-job-")[2],
        f"{row.get('DeviceName', '') or '(no device)'} · {row.get('ComputeUnits', '')}",
        f"…{worker[-8:]}" if worker else "",
        row.get("SignatureStatus", "") or row.get("Status", ""),
        row.get("Verified", "") or ("" if row.get("Status") == "Complete" else row.get("FailureReason", "")),
        row.get("QuorumNetworks", "").replace(";", ", "),
        row.get("QuorumOwners", "").replace(";", ", "),
        row.get("DeviceClass", ""),
        row.get("Claim", ""),
    )


def provenance_html(report: CampaignReport) -> list[str]:
    """report.html's provenance section: one line per task (a capacity search's levels left out)."""
    rows = [t.row for t in report.results if t.row.get("CapacityRow") != "level"]
    if not rows:
        return []
    head = "".join(f"<th>{for_html(h)}</th>" for h in _HEAD)
    body = "".join("<tr>" + "".join(f"<td>{for_html(c)}</td>" for c in _cells(row)) + "</tr>" for row in rows)
    return [
        "<h2>Provenance: who measured each task, and how it was checked</h2>",
        '<p class="muted">signature: the worker\'s signed result as the submitter checked it; verified: '
        "how its replicas settled it (single: no other replica checked it)</p>",
        *([f'<p id="swarm">swarm: {for_html(named(report.swarm))}</p>'] if report.swarm else []),
        f'<div id="provenance"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>',
    ]
