"""A result bundle checked by anyone, offline: `sark-node verify`'s judgement, pure.

Who is trusted for what. A reader trusts no file: not results.json, not bundle.json, not the
submitter, not a worker. What each check proves:

- the seal: the submitter (its peer id embeds its key) sealed this results.json and this body; a
  byte changed by anyone else breaks it. The submitter itself can seal anything, so every check below
  stands without it.
- each row: its worker signed the raw parts for this campaign, this task and this submitter (a
  result cannot be moved from another campaign or submitter); a load's records fit the schedule its
  offer gave (a fleet member's deal, an open loop's seed: `check_sends`; that schedule is kept in the
  bundle, the job's spec is the campaign's, and records the worker signed cannot follow another); a
  load's records are held to what the submitter saw of their server when it accepted them (the floor
  it measured, the rise of the server's counters: `ServerWitness`), its word, since no one else read
  that server then; so a result its own view refused cannot be sealed as accepted;
  every figure of results.json's row, its derived measurement and its samples are derived again from
  those parts by the submitter's own deriver (`check_figures`) and must match to the bit. A
  results.json row without a signed result, a signed result without its row, and a task twice are
  named; so is a result whose bundle job is not its signed task id's.
- each verification group: every replica's figure is derived again from its signed parts; each
  replica's signed device must fall in the group's class (`device_class`), one class compared
  whole among them (the short name is 32 bits); the band must be the one
  the class's spread gives (`agreement.band`), and that spread PRIOR's for the job's processes when
  the pool was under POOL_MIN (a reader checks it; above, the spread is the submitter's store's word
  and is shown so); the agreeing majority must be a strict majority of at least two, pairwise within
  the band with one outputs fingerprint (or each within the band of the reference), and the agreed
  figure their median (or the reference's). An outlier that agrees with the majority was kept out by
  the submitter's record of its peer (distrust): shown, since no bundle can prove that history.
- rows no single signed result holds (`mergeproof`): a fleet's merged row derived again from its
  members' signed records (its members are the job's signed results, its size their deals'), a
  capacity search's level rows from the levels its worker signed; a complete row with neither is named.
- claims: each peer's advertised device and the claim problems that kept it from jobs (a refused
  challenge's figures are in the problem) are shown; where the device its results signed differs from
  the advert placement read, that is shown too.

Every problem names its place (the file, the row and its task, the field); a reader that cannot read
a file at all gets `BundleError` (not a bundle), never a half judgement.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from protocol import (
    DOMAIN_BUNDLE,
    DOMAIN_RESULT,
    BundleSeal,
    Envelope,
    Measurement,
    RecordError,
    ResultBody,
    field_problems,
)
from protocol.records import open_envelope
from scheduler.language import Campaign
from scheduler.language.fleet import is_fleet
from scheduler.results.bundle import (
    BUNDLE_FILE,
    Bundle,
    BundleBody,
    GroupProof,
    PeerProof,
    RowProof,
    canonical,
    digest,
)
from scheduler.results.columns import FLEET_COLUMNS
from scheduler.results.document import CampaignReport, ReportTask, ResultsFileError
from scheduler.results.mergeproof import Member, check_derived_rows, exact, job_of
from scheduler.results.rows import body_columns
from scheduler.results.verifygroups import GroupVerification
from scheduler.verification.agreement import POOL_MIN, PRIOR, Replica, agree, band, replica_of
from scheduler.verification.classes import DeviceClass, device_class
from scheduler.verification.figures import Refusal, check_figures
from scheduler.verification.sendcheck import check_sends
from scheduler.verification.servercount import within_count

RESULTS_FILE: Final = "results.json"
NO_WINDOW: Final = 0.0
"""`now` for opening a signed result or seal: neither carries a validity window (no `expires_at`)."""


class BundleError(Exception):
    """A folder that is no bundle this version can read: the file, the stage and the cause."""

    def __init__(self, file: str, stage: str, cause: str) -> None:
        self.file, self.stage, self.cause = file, stage, cause
        super().__init__(f"{file}: {stage}: {cause}")


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold: where (file, row, field) and why."""

    place: str
    cause: str

    def __str__(self) -> str:
        return f"{self.place}: {self.cause}"


@dataclass
class Proof:
    """The judgement: every problem, and what a reader is shown (claims, groups, the submitter's word)."""

    submitter: str = ""
    rows: int = 0
    derived: int = 0
    groups: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """Whether everything checked out."""
        return not self.problems

    def refuse(self, place: str, cause: str) -> None:
        """Add a problem."""
        self.problems.append(Problem(place, cause))


def read_bundle(bundle_text: bytes, results_text: bytes) -> tuple[Bundle, dict[str, Any], CampaignReport]:
    """The bundle, its body as the file's JSON, and the report; `BundleError` for what cannot be read."""
    try:
        raw = json.loads(bundle_text)
    except (ValueError, RecursionError) as exc:
        raise BundleError(BUNDLE_FILE, "parsing JSON", str(exc)) from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("body"), dict):
        raise BundleError(BUNDLE_FILE, "reading the bundle", "not a JSON object with a body")
    if raw.get("format") != "sark-bundle/1":
        raise BundleError(
            BUNDLE_FILE, "reading the bundle", f"format {raw.get('format')!r}, not sark-bundle/1"
        )
    try:
        bundle = Bundle.model_validate(raw)
    except ValidationError as exc:
        raise BundleError(BUNDLE_FILE, "reading the bundle", "; ".join(field_problems(exc)[:8])) from exc
    try:
        report = CampaignReport.from_json(results_text, source=RESULTS_FILE)
    except ResultsFileError as exc:
        cause = "; ".join(str(p) for p in exc.problems[:8])
        raise BundleError(RESULTS_FILE, "reading the report", cause) from exc
    return bundle, raw["body"], report


def check(bundle_text: bytes, results_text: bytes) -> Proof:
    """Every check of a bundle (bundle.json's bytes) against its results.json's bytes.

    Raises:
        BundleError: either file is no bundle or report this version can read.
    """
    bundle, raw_body, report = read_bundle(bundle_text, results_text)
    proof = Proof(submitter=bundle.body.submitter)
    _check_seal(proof, bundle, raw_body, results_text, report)
    derived = _check_rows(proof, bundle.body, report)
    held = [r for r in bundle.body.rows if r.task_id in derived]  # the bundle's (sealed, task) order
    jobs = report.campaign.jobs
    found = check_derived_rows(
        report, [Member(r.task_id, derived[r.task_id].body, r.offer(jobs[r.job_index].spec)) for r in held]
    )
    proof.problems += [Problem(place, cause) for place, cause in found.problems]
    proof.notes += found.notes
    proof.derived = found.derived
    _check_groups(proof, bundle.body, report, derived)
    _show_claims(proof, bundle.body.peers, derived)
    return proof


def _check_seal(
    proof: Proof, bundle: Bundle, raw_body: dict[str, Any], results_text: bytes, report: CampaignReport
) -> None:
    body = bundle.body
    try:
        seal = open_envelope(bundle.seal.envelope(), DOMAIN_BUNDLE, BundleSeal, now=NO_WINDOW)
    except (ValueError, RecordError) as exc:
        proof.refuse(f"{BUNDLE_FILE} seal", f"the submitter's signature does not hold: {exc}")
        return
    said = (
        ("seal.submitter", seal.submitter, body.submitter),
        ("seal.campaign_id", seal.campaign_id, body.campaign_id),
        ("body.campaign_id", body.campaign_id, report.campaign_id),
        ("seal.rows", seal.rows, len(body.rows)),
    )
    for where, sealed, found in said:
        if sealed != found:
            proof.refuse(f"{BUNDLE_FILE} {where}", f"{sealed!r}, but the bundle says {found!r}")
    if seal.results_sha256 != digest(results_text):
        proof.refuse(RESULTS_FILE, "its bytes are not the ones the submitter sealed (sha256 differs)")
    if seal.body_sha256 != digest(canonical(raw_body)):
        proof.refuse(f"{BUNDLE_FILE} body", "not the body the submitter sealed (sha256 differs)")


@dataclass(frozen=True)
class Derived:
    """A row whose signed result held: its body with the derived measurement, and its replica."""

    body: ResultBody
    replica: Replica
    job_index: int


def _check_rows(proof: Proof, body: BundleBody, report: CampaignReport) -> dict[str, Derived]:
    """Each signed result checked and derived again, and each results.json row against it."""
    shown: dict[str, tuple[int, ReportTask]] = {}
    for i, task in enumerate(report.results):
        task_id = task.row.get("JobId", "")
        if task.signed is None:
            continue
        if task_id in shown:
            proof.refuse(f"{RESULTS_FILE} results[{i}] (task {task_id})", "the task's row is there twice")
        shown[task_id] = (i, task)
    peers = {p.peer_id: p for p in body.peers}
    derived: dict[str, Derived] = {}
    counts = Counter(r.task_id for r in body.rows)
    for n, row in enumerate(body.rows):
        place = f"{BUNDLE_FILE} rows[{n}] (task {row.task_id})"
        if counts[row.task_id] > 1:
            proof.refuse(place, "the task's signed result is there twice")
            continue
        found = _derive_row(proof, place, row, body, report.campaign, peers)
        if found is None:
            continue
        derived[row.task_id] = found
        if row.task_id not in shown:
            proof.refuse(place, f"its row is missing from {RESULTS_FILE}")
            continue
        i, task = shown[row.task_id]
        generate = report.campaign.jobs[found.job_index].spec.generate
        fleet = generate is not None and is_fleet(generate)
        _compare(proof, f"{RESULTS_FILE} results[{i}] (task {row.task_id})", task, found.body, fleet)
    proof.rows = len(derived)
    witnessed = sum(1 for row in body.rows if row.server is not None and row.task_id in derived)
    if witnessed:
        proof.notes.append(
            f"{witnessed} load result(s) held to what the submitter saw of their server (the floor it "
            "measured, the rise of the server's counters): its word, no one else read that server then"
        )
    for task_id, (i, _) in shown.items():
        if not any(r.task_id == task_id for r in body.rows):
            proof.refuse(f"{RESULTS_FILE} results[{i}] (task {task_id})", "no signed result in the bundle")
    return derived


def _derive_row(
    proof: Proof,
    place: str,
    row: RowProof,
    body: BundleBody,
    campaign: Campaign,
    peers: Mapping[str, PeerProof],
) -> Derived | None:
    """The row's signed result opened and its figures derived, or None with the problem said."""
    try:
        envelope: Envelope = row.result.envelope()
        result = open_envelope(envelope, DOMAIN_RESULT, ResultBody, now=NO_WINDOW)
    except (ValueError, RecordError) as exc:
        proof.refuse(f"{place} result", f"the worker's signature does not hold: {exc}")
        return None
    bound = (
        ("task_id", result.task_id, row.task_id),
        ("campaign_id", result.campaign_id, body.campaign_id),
        ("submitter", result.submitter, body.submitter),
    )
    for name, signed, said in bound:
        if signed != said:
            proof.refuse(f"{place} result.{name}", f"the worker signed {signed!r}, the bundle says {said!r}")
    if not 0 <= row.job_index < len(campaign.jobs):
        proof.refuse(f"{place} job_index", f"no job {row.job_index} in the campaign")
        return None
    if job_of(body.campaign_id, result.task_id) != row.job_index:
        proof.refuse(f"{place} job_index", f"{row.job_index}, but its worker signed {result.task_id!r}")
        return None
    spec = campaign.jobs[row.job_index].spec
    peer = peers.get(result.worker)
    figures = check_figures(result.measurement, spec, peer.device if peer else None, result.device)
    server, offer = row.server, row.offer(spec)
    if not isinstance(figures, Refusal):  # a load's records against the schedule it was offered
        figures = check_sends(figures, spec, offer, server.floor() if server else None)
    count = server.count() if server is not None else None
    if not isinstance(figures, Refusal) and server is not None and count is not None:
        figures = within_count(figures, spec, offer, count, server.claimed_before())
    if isinstance(figures, Refusal):
        proof.refuse(f"{place} result.measurement", f"{figures.reason}: {figures.detail}")
        return None
    replica = replica_of(result.worker, figures, spec)
    return Derived(result.with_(measurement=figures), replica, row.job_index)


def _compare(proof: Proof, place: str, task: ReportTask, body: ResultBody, fleet: bool = False) -> None:
    """results.json's entry against the body derived again: every cell of its row that the body
    gives, its derived measurement, its samples, its worker and device, bit for bit. A fleet
    member's row shows the fleet's columns of its own records instead of its load's (a closed loop's
    member no asked rate: `fleetrows.fleet_columns`), which `mergeproof` derives again from them."""
    signed = task.signed
    assert signed is not None
    skipped = set(FLEET_COLUMNS) if fleet else set()
    for column, value in body_columns(body).items():
        if column in task.row and column not in skipped and task.row[column] != value:
            proof.refuse(
                f"{place} row.{column}", f"{task.row[column]!r}, its signed raw parts give {value!r}"
            )
    ours = body.measurement.with_(samples_ms=())
    for path, theirs, derived in exact("signed.measurement", _dump(signed.measurement), _dump(ours)):
        proof.refuse(f"{place} {path}", f"{theirs!r}, its signed raw parts give {derived!r}")
    if task.samples_ms != body.measurement.samples_ms:
        proof.refuse(f"{place} samples_ms", "not the samples its worker signed")
    if signed.worker != body.worker:
        proof.refuse(f"{place} signed.worker", f"{signed.worker!r}, signed by {body.worker!r}")
    for path, theirs, derived in exact("signed.device", _dump(signed.device), _dump(body.device)):
        proof.refuse(f"{place} {path}", f"{theirs!r}, its worker signed {derived!r}")


def _dump(value: Measurement | Any) -> Any:
    return value.model_dump(mode="json")


def _check_groups(
    proof: Proof, body: BundleBody, report: CampaignReport, derived: Mapping[str, Derived]
) -> None:
    """Each group's agreement recomputed from its replicas' derived figures, and results.json's."""
    shown = {g.group: g for g in report.verification}
    ids = Counter(g.group for g in body.groups)
    for n, group in enumerate(body.groups):
        place = f"{BUNDLE_FILE} groups[{n}] ({group.group})"
        if ids[group.group] > 1:
            proof.refuse(place, "the group is there twice")
        replicas = _replicas(proof, place, group, report.campaign, derived)
        _check_band(proof, place, group, report.campaign, replicas)
        _check_majority(proof, place, group, replicas)
        said = shown.get(group.group)
        if said is None:
            proof.refuse(place, f"not among {RESULTS_FILE}'s verification groups")
        else:
            _compare_group(proof, f"{RESULTS_FILE} verification ({group.group})", said, group, replicas)
    for group_id in shown.keys() - ids.keys():
        if not group_id.endswith("/unplaced"):
            proof.refuse(f"{RESULTS_FILE} verification ({group_id})", "no such group in the bundle")
    proof.groups = len(body.groups)


def _replicas(
    proof: Proof, place: str, group: GroupProof, campaign: Campaign, derived: Mapping[str, Derived]
) -> dict[str, Replica]:
    """The group's replicas by peer, each from its derived figures, each of the group's class: one
    class compared whole among them (the group keeps the short name, for display: a twin ground to
    share its 32 bits, about 2^32 hashes, or a birthday pair of two colluding boards, 2^16, shares
    the name and not the key), and that class's short name the group's."""
    out: dict[str, Replica] = {}
    first: tuple[str, DeviceClass] | None = None
    for task_id in group.tasks:
        found = derived.get(task_id)
        if found is None:
            continue  # a replica that ended without a result (or whose result did not hold: said there)
        if found.job_index != group.job_index:
            proof.refuse(f"{place} tasks", f"{task_id} is a task of job {found.job_index}")
        unit = (
            campaign.jobs[group.job_index].spec.compute_unit if group.job_index < len(campaign.jobs) else None
        )
        cls = device_class(found.body.device, unit) if unit is not None else None
        if cls is not None and group.device_class and cls.name != group.device_class:
            said = f"{task_id}'s signed device is of {cls.name}, not {group.device_class}"
            proof.refuse(f"{place} device_class", said)
        elif cls is not None and first is not None and cls.key != first[1].key:
            proof.refuse(
                f"{place} device_class",
                f"{task_id}'s signed device is of {cls.id}, {first[0]}'s of {first[1].id}: two classes "
                f"that share the short name {cls.name}",
            )
        first = first or ((task_id, cls) if cls is not None else None)
        if found.replica.peer_id in out:
            proof.refuse(f"{place} tasks", f"{found.replica.peer_id} is two replicas of the group")
        out[found.replica.peer_id] = found.replica
    return out


def _check_band(
    proof: Proof, place: str, group: GroupProof, campaign: Campaign, replicas: Mapping[str, Replica]
) -> None:
    """The band is the class spread's, and that spread PRIOR's while the pool was small."""
    if len(replicas) < 2:
        return
    if group.band is None or group.class_spread is None:
        proof.refuse(f"{place} band", "replicas were compared, but the group states no band")
        return
    if group.band != band(group.class_spread):
        proof.refuse(
            f"{place} band",
            f"{group.band!r}, the class's spread {group.class_spread!r} gives {band(group.class_spread)!r}",
        )
    processes = campaign.jobs[group.job_index].spec.processes if group.job_index < len(campaign.jobs) else 0
    if group.processes != processes:
        proof.refuse(f"{place} processes", f"{group.processes}, the campaign's job runs {processes}")
    if group.pooled < POOL_MIN:
        prior = PRIOR / math.sqrt(max(processes, 1))
        if group.class_spread != prior:
            proof.refuse(
                f"{place} class_spread",
                f"{group.class_spread!r}, PRIOR at {processes} processes is "
                f"{prior!r} (the pool held {group.pooled} < {POOL_MIN})",
            )
    else:
        proof.notes.append(
            f"{group.group}: band {group.band:.1%} from the submitter's pool of {group.pooled} "
            "earlier replicas of the class (its store's word)"
        )


def _check_majority(proof: Proof, place: str, group: GroupProof, replicas: Mapping[str, Replica]) -> None:
    """A replicated group: a strict majority of at least two, pairwise within the band (or each
    within the reference's), its figure their median (or the reference's)."""
    if group.outcome != "replicated":
        if group.agreed or group.figure_ms is not None:
            proof.refuse(f"{place} outcome", f"{group.outcome}, yet it names an agreed figure or majority")
        return
    missing = [p for p in group.agreed if p not in replicas]
    if missing:
        proof.refuse(f"{place} agreed", f"{', '.join(missing)} gave no result of the group that holds")
        return
    spread = group.class_spread if group.class_spread is not None else math.inf
    members = [replicas[p] for p in group.agreed]
    if len(members) < 2 or 2 * len(members) <= len(replicas):
        proof.refuse(
            f"{place} agreed", f"{len(members)} of {len(replicas)} replicas is no strict majority of two"
        )
    reference = replicas.get(group.reference) if group.reference else None
    pairs = [(reference, m) for m in members if m is not reference] if reference else _pairs(members)
    for a, b in pairs:
        if not agree(a, b, spread):
            proof.refuse(
                f"{place} agreed",
                f"{a.peer_id} {a.median_ms!r} ms and {b.peer_id} {b.median_ms!r} "
                "ms do not agree within the band (or their outputs differ)",
            )
    figure = (
        reference.median_ms
        if reference
        else statistics.median(m.median_ms for m in members)
        if members
        else None
    )
    if group.figure_ms != figure:
        proof.refuse(f"{place} figure_ms", f"{group.figure_ms!r}, the majority's figures give {figure!r}")
    for peer, r in replicas.items():
        if peer not in group.agreed and members and all(agree(r, m, spread) for m in members):
            proof.notes.append(
                f"{group.group}: {peer} agrees with the majority but was kept out by the "
                f"submitter's record of it ({group.reason or 'no reason given'})"
            )


def _pairs(members: Sequence[Replica]) -> list[tuple[Replica, Replica]]:
    return [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]


def _compare_group(
    proof: Proof, place: str, said: GroupVerification, group: GroupProof, replicas: Mapping[str, Replica]
) -> None:
    """results.json's group against the sealed one and the replicas' derived figures."""
    for name, theirs, ours in (
        ("outcome", said.outcome, group.outcome),
        ("agreed_ms", said.agreed_ms, group.figure_ms),
        ("band", said.band, group.band),
        ("device_class", said.device_class, group.device_class),
        ("reference", said.reference, group.reference),
    ):
        if theirs != ours:
            proof.refuse(f"{place} {name}", f"{theirs!r}, the bundle's group says {ours!r}")
    if tuple(r.task_id for r in said.replicas) != group.tasks:
        proof.refuse(f"{place} replicas", "not the bundle's group's tasks")
    for r in said.replicas:
        derived = replicas.get(r.peer)
        if r.figure_ms is not None and (derived is None or derived.median_ms != r.figure_ms):
            ours_ms = None if derived is None else derived.median_ms
            proof.refuse(
                f"{place} replicas ({r.task_id}).figure_ms",
                f"{r.figure_ms!r}, its signed raw parts give {ours_ms!r}",
            )


def _show_claims(proof: Proof, peers: Sequence[PeerProof], derived: Mapping[str, Derived]) -> None:
    """Each peer's refused claims, and a signed device that differs from its advert's."""
    signed = {d.body.worker: d.body.device for d in derived.values()}
    for peer in peers:
        for line in peer.challenged:
            proof.notes.append(f"challenge of {peer.peer_id} ({peer.device.device_name}): {line}")
        for problem in peer.claim:
            proof.notes.append(f"claim of {peer.peer_id} ({peer.device.device_name}) not believed: {problem}")
        device = signed.get(peer.peer_id)
        if device is not None and device != peer.device:
            proof.notes.append(f"{peer.peer_id}: the device its results signed differs from its advert's")
