"""What `sark-node plan` shows of a dry run: the terminal's lines and `plan --json`.

`node.cli.campaign.plan` runs the dry run (`node.submitter.run.plan`) and hands its `scheduler.Plan` here;
nothing here talks to the swarm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import scheduler as sch
    from scheduler.verification import DeviceClass


def plan_json(result: sch.Plan, errors: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """`plan --json`: per job, the peers matched, chosen and rejected (with reasons and codes), their
    classes (short names, and whole ids: `class_ids`), owners (declared ones) and claims, how its
    replicas would be placed, and the band each class's replicas would be judged with (`errors`: the
    store's pools, `bands`)."""
    return {"jobs": [_job_json(job, errors or {}) for job in result.jobs]}


def _job_json(job: sch.JobPlan, errors: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    shown = _labels(job)
    return {
        "job": job.job.index,
        "unit": job.job.spec.compute_unit.value,
        "wanted": job.wanted,
        "chosen": [r.peer.peer_id for r in job.chosen],
        "matching": [r.peer.peer_id for r in job.matching],
        "classes": {r.peer.peer_id: _label(job, r.peer, shown) for r in job.matching},
        "class_ids": {r.peer.peer_id: _class_of(job, r.peer).id for r in job.matching},
        "claims": {r.peer.peer_id: list(r.peer.claim) for r in job.matching if r.peer.claim},
        "owners": {r.peer.peer_id: r.peer.owner.owner_id for r in job.matching if r.peer.owner.owner_id},
        "class_owners": _class_owners(job, shown),
        "replicas": job.verify.replicas,
        "replica_class": _label(job, job.chosen[0].peer, shown)
        if job.verify.replicated and job.chosen
        else "",
        "rejected": [
            {
                "peer_id": r.peer_id,
                "device": r.device_name,
                "reasons": list(r.details),
                "codes": [reason.code.value for reason in r.reasons],
            }
            for r in job.rejected
        ],
        "shortfall": job.shortfall,
        "unverifiable": job.unverifiable,
        "awaiting": list(job.awaiting),
        "references": _references(job),
        "bands": bands(job, errors),
    }


def _class_of(job: sch.JobPlan, peer: sch.PeerView) -> DeviceClass:
    """A peer's device class for the job's unit (`scheduler.verification.classes`)."""
    from scheduler.verification import device_class

    return device_class(peer.profile, job.job.spec.compute_unit)


def _labels(job: sch.JobPlan) -> dict[str, str]:
    """How `plan` names each class among a job's feasible peers, by its whole key: its short name, or
    its whole id where two of them share the short name (a profile ground to collide in 32 bits: the
    two stay two classes on the screen, as everywhere a rule names one)."""
    classes = {_class_of(job, r.peer) for r in job.matching}
    names = Counter(c.name for c in classes)
    return {c.key: c.name if names[c.name] == 1 else c.id for c in classes}


def _label(job: sch.JobPlan, peer: sch.PeerView, shown: Mapping[str, str]) -> str:
    """A peer's class as `plan` names it (`_labels`)."""
    return shown[_class_of(job, peer).key]


def _class_owners(job: sch.JobPlan, shown: Mapping[str, str]) -> dict[str, list[str]]:
    """Each class among a job's feasible peers where some peer declared an owner: its peers' owners,
    each once (`voter_name`: a peer that declared none is its own), so `plan` says how many votes a
    class has (one owner's devices are one)."""
    from scheduler.verification import voter_name

    found: dict[str, set[str]] = {}
    declared: set[str] = set()
    for r in job.matching:
        cls = _label(job, r.peer, shown)
        found.setdefault(cls, set()).add(voter_name(r.peer.peer_id, r.peer.owner.owner_id))
        if r.peer.owner.owner_id:
            declared.add(cls)
    return {cls: sorted(owners) for cls, owners in found.items() if cls in declared}


def _references(job: sch.JobPlan) -> list[dict[str, str]]:
    """Each class among a replicated job's feasible peers: the reference device that joins its
    quorums (`verify.reference`), or "" and why none does; then each named reference that fits
    none of them ([] for a job that is not replicated)."""
    from scheduler.state import class_references

    if not job.verify.replicated:
        return []
    peers = [r.peer for r in job.matching]
    found = [
        {"class": c.device_class.name, "reference": c.reference, "why_not": c.why_not}
        for c in class_references(peers, job.job.spec.compute_unit, job.verify, job.gap)
    ]
    fitting = {p.peer_id for p in peers} | {p.owner.owner_id for p in peers if p.owner.owner_id}
    missing = [p for p in job.verify.reference if p not in fitting]
    found += [
        {"class": "", "reference": "", "why_not": f"reference {p}: not a feasible peer"} for p in missing
    ]
    return found


def bands(job: sch.JobPlan, errors: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """Each class among a replicated job's feasible peers with the band its replicas would be judged
    with now (`agreement.judged_band` over the store's pool of that class and model), and how many
    replicas it was learnt from (0: the prior, a fresh class; a single-process job then stands at
    46 %, wide enough to let a 0.72x claim agree: `plan` says so before anything runs)."""
    from scheduler.verification import judged_band

    if not job.verify.replicated:
        return []
    shown = _labels(job)
    out: dict[str, dict[str, Any]] = {}
    processes = job.job.spec.processes
    for r in job.matching:
        cls = _class_of(job, r.peer)
        pooled = errors.get(f"{cls.key}/{job.needs.model_sha256[:16]}", ())
        band, learnt = judged_band(pooled, processes)
        out.setdefault(cls.key, {"class": shown[cls.key], "band": round(band, 4), "processes": processes,
                                 "learnt_from": learnt})  # fmt: skip
    return list(out.values())


def print_plan(result: sch.Plan, errors: Mapping[str, Sequence[float]] | None = None) -> None:
    """`plan` on the terminal: per job, each peer chosen, matching or rejected with why, and its replicas."""
    from node.cli.console import console as out_console
    from node.submitter.challenge import MOST_CHALLENGES
    from protocol import for_rich

    console = out_console()
    for job in result.jobs:
        unit = job.job.spec.compute_unit.value
        shown = _labels(job)
        console.print(
            f"[bold]job {job.job.index}[/] {unit}: {len(job.chosen)} of {job.wanted} task(s) placed"
        )
        if job.verify.replicas > 1 and job.chosen:
            console.print(
                f"  replicated {job.verify.replicas}x on class {_label(job, job.chosen[0].peer, shown)}"
            )
        for ranked in job.matching:
            peer = for_rich(
                f"{ranked.peer.profile.device_name} {ranked.peer.peer_id} {_label(job, ranked.peer, shown)}"
            )
            claim = (
                f" [red]claim_unverified: {for_rich('; '.join(ranked.peer.claim))}[/]"
                if ranked.peer.claim
                else ""
            )
            owner = f" {for_rich(ranked.peer.owner.owner_id)}" if ranked.peer.owner.owner_id else ""
            console.print(f"  {'[green]✓[/]' if ranked in job.chosen else '[cyan]·[/]'} {peer}{owner}{claim}")
        for rejection in job.rejected:
            why = for_rich(f"{rejection.device_name} {rejection.peer_id}: {'; '.join(rejection.details)}")
            console.print(f"  [red]✗[/] {why}")
        for cls, owners in _class_owners(job, shown).items():
            console.print(
                f"  class {cls}: {len(owners)} owner(s), one vote each: {for_rich(', '.join(owners))}"
            )
        for b in bands(job, errors or {}):
            learnt = (
                f"learnt from {b['learnt_from']} replicas" if b["learnt_from"] else "the prior: a fresh class"
            )
            console.print(
                f"  class {b['class']}: judged within {b['band']:.1%} at {b['processes']} process(es) "
                f"({learnt})"
            )
        for ref in _references(job):
            said = f"reference {ref['reference']}" if ref["reference"] else ref["why_not"]
            console.print(f"  {'class ' + ref['class'] + ': ' if ref['class'] else ''}{for_rich(said)}")
        if job.awaiting:  # said before the run: the job waits for these peers' next challenge
            console.print(
                f"  [yellow]waits: {len(job.awaiting)} peer(s) its challenge refused are challenged again "
                f"later in the campaign (up to {MOST_CHALLENGES} challenges each); unverifiable if none "
                f"passes: {for_rich(job.shortfall)}[/]"
            )
        elif job.unverifiable:  # said before the run: these tasks will not run alone
            console.print(f"  [red]unverifiable: {for_rich(job.shortfall)}[/]")
        elif job.shortfall:
            console.print(f"  [yellow]{for_rich(job.shortfall)}[/]")
