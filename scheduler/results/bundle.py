"""A campaign's result bundle: what a third party needs to check results.json without its swarm.

`submit` writes bundle.json beside results.json. It holds, as the submitter had them:

- each measured task's result exactly as its worker signed it (`SignedPart`: the msgpack payload,
  the signature and the worker's public key, whose libp2p peer id names the worker), so every figure
  can be derived again from its raw parts (`scheduler.check_figures`, the one deriver), and the
  schedule its offer gave a load (`Schedule`: a fleet member's deal, an open loop's seed), and what the
  submitter saw of a load's server itself when it accepted the result (`ServerWitness`: the floor it
  measured, the rise of the server's counters between its reads);
- each peer that ran a task as placement relied on it: its advertised device, the network its
  connection came from, its declared owner, and the claim problems (a refused challenge, physics,
  the class) that kept it from jobs;
- each verification group: its replicas' tasks, the peers of the agreeing majority, the agreed figure,
  the band, and the class's spread and pool size the band was computed from;
- the campaign file's text as submitted (results.json holds the campaign as parsed and run);
- the digests of results.json and of this body, signed by the submitter (`protocol.BundleSeal`).

What each part proves, and to whom, is in `scheduler.results.proof`, which checks a bundle. The body
is hashed as canonical JSON (`canonical`): keys sorted, no spaces, ASCII; a float is written as
Python's `repr`, which reads back to the same bits.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from protocol import DeviceProfile, Envelope, FleetDeal, TaskSpec, Value
from scheduler.results.verifygroups import group_of
from scheduler.state.placement import PeerView
from scheduler.state.tasks import TaskView
from scheduler.verification.classes import DeviceClass
from scheduler.verification.networks import network_of
from scheduler.verification.servercount import Claimed, Quantity, ServerCount
from scheduler.verification.serverfloor import ServerFloor

BUNDLE_FORMAT: Final = "sark-bundle/1"
"""The `format` of a bundle this version writes and reads."""
BUNDLE_FILE: Final = "bundle.json"
"""The bundle's name beside results.json."""


class SignedPart(Value):
    """A signed record as bytes a reader checks: the signer's peer id and raw public key, the payload
    as signed, and the Ed25519 signature (base64 in the file)."""

    peer_id: str = Field(max_length=128)
    public_key: str
    payload: str
    signature: str

    @classmethod
    def of(cls, envelope: Envelope) -> SignedPart:
        """The part of an envelope."""
        return cls(
            peer_id=envelope.peer_id,
            public_key=_b64(envelope.public_key),
            payload=_b64(envelope.payload),
            signature=_b64(envelope.signature),
        )

    def envelope(self) -> Envelope:
        """The envelope again, its sizes checked (`protocol.Envelope`).

        Raises:
            ValueError: a field is not base64, or the envelope does not fit (pydantic's error is one).
        """
        try:
            raw = {k: base64.b64decode(getattr(self, k), validate=True) for k in _BYTES}
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from exc
        return Envelope(peer_id=self.peer_id, **raw)


_BYTES: Final = ("public_key", "payload", "signature")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Schedule(Value):
    """What a load's offer gave beyond its job's spec: a fleet member's deal, an open loop's seed
    (`check_sends` reads nothing else of the offer). Kept alone, not with the whole offer spec: the
    job's spec (its prompts, kilobytes each time) is the campaign's, kept once."""

    deal: FleetDeal | None = None
    arrival_seed: int | None = Field(default=None, ge=0, lt=2**63)

    @classmethod
    def of(cls, spec: TaskSpec | None) -> Schedule | None:
        """The schedule an offer spec carried, or None where it carried none."""
        generate = spec.generate if spec is not None else None
        if generate is None or (generate.deal is None and generate.arrival_seed is None):
            return None
        return cls(deal=generate.deal, arrival_seed=generate.arrival_seed)


class ServerWitness(Value):
    """What the submitter saw of a load's server itself when it accepted the result: the floor it
    measured (`scheduler.ServerFloor`: before the job, the least of its probes where a record under it
    made the submitter probe again) and the rise of the server's own counters between its reads
    (`scheduler.ServerCount`), with what the job's results accepted before this one claimed and the
    submitter's own later probes sent. Its word (no one else read that server then): a reader holds
    the signed records to it as the submitter did, so a result the submitter's own view refused cannot
    be sealed as accepted."""

    floor_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    floor_said: str = Field(default="", max_length=512)
    metrics_url: str = Field(default="", max_length=2048)
    rises: dict[Quantity, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    counters: dict[Quantity, Annotated[str, Field(max_length=256)]] = Field(default_factory=dict)
    before: dict[Quantity, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)

    @classmethod
    def of(
        cls, floor: ServerFloor | None, count: ServerCount | None, before: Claimed | None
    ) -> ServerWitness | None:
        """The witness of a result judged with `floor` and `count` (None: neither was had)."""
        if floor is None and count is None:
            return None
        return cls(
            floor_ms=floor.floor_ms if floor is not None else None,
            floor_said=floor.said if floor is not None else "",
            metrics_url=count.url if count is not None else "",
            rises=dict(count.rises) if count is not None else {},
            counters=dict(count.names) if count is not None else {},
            before={q: (before or Claimed()).of(q) for q in count.rises} if count is not None else {},
        )

    def floor(self) -> ServerFloor | None:
        """The floor the result was held to, or None."""
        return ServerFloor(self.floor_ms, self.floor_said) if self.floor_ms is not None else None

    def count(self) -> ServerCount | None:
        """The server's count the result was held to, or None (no counter read: only the floor)."""
        if not self.rises:
            return None
        return ServerCount(
            dict(self.rises), {q: self.counters.get(q, q) for q in self.rises}, self.metrics_url
        )

    def claimed_before(self) -> Claimed:
        """What the job's results accepted before this one claimed, per quantity."""
        return Claimed(**{q: int(n) for q, n in self.before.items()})


class RowProof(Value):
    """One measured task's signed result: its task, its job, the worker's envelope, the schedule
    its offer gave where it gave one (a fleet member's deal, an open loop's seed: its records are
    checked against it, `check_sends`), and what the submitter saw of its server (`server`).
    `offered` is the whole offer spec, as bundles before the schedule alone was kept held it (read,
    never written)."""

    task_id: str
    job_index: int = Field(ge=0)
    result: SignedPart
    schedule: Schedule | None = None
    offered: TaskSpec | None = None
    server: ServerWitness | None = None

    def offer(self, spec: TaskSpec) -> TaskSpec | None:
        """The spec its offer gave: the job's `spec` with the kept schedule (None: none kept)."""
        if self.offered is not None:
            return self.offered
        if self.schedule is None or spec.generate is None:
            return None
        kept = {"deal": self.schedule.deal, "arrival_seed": self.schedule.arrival_seed}
        return spec.with_(generate=spec.generate.with_(**kept))


class PeerProof(Value):
    """A peer as placement relied on it: its advertised device, its network, its declared owner, why
    a claim of its device was not believed (empty: believed), and what its answered challenges
    measured (empty: none was asked of it, or it did not answer)."""

    peer_id: str
    device: DeviceProfile
    network: str = ""
    owner: str = ""
    claim: tuple[str, ...] = ()
    challenged: tuple[str, ...] = ()


class GroupProof(Value):
    """One verification group as it was settled.

    Attributes:
        group: the group's id (its first task).
        job_index: its job.
        device_class: its class's short name (`DeviceClass.name`).
        outcome: how it settled (`scheduler.results.GroupOutcome`).
        tasks: its replicas' task ids, in task order.
        agreed: the peers of the agreeing majority (empty unless replicated).
        figure_ms: the agreed figure.
        band: the relative band it was judged with; None where nothing was compared.
        class_spread: the class's spread the band came from (`agreement.band`).
        pooled: how many honest replicas' errors the class's pool held (`Agreement.pooled`).
        processes: the job's processes per task (PRIOR's spread is PRIOR / sqrt(processes)).
        reference: the reference device that vouched, or "".
        reason: the settlement's reason.
    """

    group: str
    job_index: int = Field(ge=0)
    device_class: str = ""
    outcome: str
    tasks: tuple[str, ...] = ()
    agreed: tuple[str, ...] = ()
    figure_ms: float | None = None
    band: float | None = None
    class_spread: float | None = None
    pooled: int = Field(default=0, ge=0)
    processes: int = Field(default=1, ge=1)
    reference: str = ""
    reason: str = ""


class BundleBody(Value):
    """What the submitter's seal covers (with results.json's digest)."""

    campaign_id: str
    submitter: str
    campaign_text: str = ""
    rows: tuple[RowProof, ...] = ()
    peers: tuple[PeerProof, ...] = ()
    groups: tuple[GroupProof, ...] = ()


class Bundle(Value):
    """bundle.json: its format, the submitter's seal and the body."""

    format: Literal["sark-bundle/1"]
    seal: SignedPart
    body: BundleBody


def canonical(value: Any) -> bytes:
    """JSON bytes that two writers of the same value agree on: keys sorted, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def digest(data: bytes) -> str:
    """The sha256 of `data`, hex."""
    return hashlib.sha256(data).hexdigest()


def body_of(
    campaign_id: str,
    submitter: str,
    campaign_text: str,
    envelopes: Mapping[str, Envelope],
    tasks: Iterable[TaskView],
    peers: Iterable[PeerView],
    processes: Mapping[int, int],
    offers: Mapping[str, TaskSpec] | None = None,
    witnesses: Mapping[str, ServerWitness] | None = None,
) -> BundleBody:
    """The body of a campaign's bundle.

    Args:
        campaign_id: the campaign.
        submitter: the submitter's peer id.
        campaign_text: the campaign file as submitted.
        envelopes: each measured task's signed result, by task id.
        tasks: every task, in task order.
        peers: the peers the scheduler knew.
        processes: each job's processes per task.
        offers: the spec each task's result answered, where the store kept one (a schedule).
        witnesses: what the submitter saw of each load's server when it accepted its result.
    """
    tasks = list(tasks)
    offers, witnesses = offers or {}, witnesses or {}
    rows = tuple(
        RowProof(
            task_id=t.task_id,
            job_index=t.job_index,
            result=SignedPart.of(envelopes[t.task_id]),
            schedule=Schedule.of(offers.get(t.task_id)),
            server=witnesses.get(t.task_id),
        )
        for t in tasks
        if t.task_id in envelopes
    )
    ran = {t.peer_id for t in tasks if t.peer_id}
    proofs = tuple(
        PeerProof(
            peer_id=p.peer_id,
            device=p.profile,
            network=network_of(p.host) or "relayed",
            owner=p.owner.owner_id,
            claim=p.claim,
            challenged=p.challenged,
        )
        for p in sorted(peers, key=lambda p: p.peer_id)
        if p.peer_id in ran
    )
    return BundleBody(
        campaign_id=campaign_id,
        submitter=submitter,
        campaign_text=campaign_text,
        rows=rows,
        peers=proofs,
        groups=_groups(tasks, processes),
    )


def _groups(tasks: list[TaskView], processes: Mapping[int, int]) -> tuple[GroupProof, ...]:
    groups: dict[str, list[TaskView]] = {}
    for task in tasks:
        if task.replica_group:
            groups.setdefault(task.replica_group, []).append(task)
    out = []
    for group, members in groups.items():
        said = next((t.agreement for t in members if t.agreement is not None), None)
        first = members[0]
        agreed = sorted({t.peer_id or "" for t in members if t.verified.startswith("replicated")})
        out.append(
            GroupProof(
                group=group,
                job_index=first.job_index,
                device_class=DeviceClass(first.device_class).name if first.device_class else "",
                outcome=_outcome(members),
                tasks=tuple(t.task_id for t in members),
                agreed=tuple(agreed),
                figure_ms=said.figure_ms if said is not None and agreed else None,
                band=said.band if said is not None else None,
                class_spread=said.class_spread if said is not None else None,
                pooled=said.pooled if said is not None else 0,
                processes=max(1, processes.get(first.job_index, 1)),
                reference=said.reference if said is not None else "",
                reason=said.reason if said is not None else "",
            )
        )
    return tuple(out)


def _outcome(members: list[TaskView]) -> str:
    """The group's outcome as `verifygroups` names it (one naming of outcomes)."""
    return group_of(members).outcome


def results_digest(results_json: bytes) -> str:
    """results.json's digest, as the seal names it."""
    return digest(results_json)


def body_digest(body: BundleBody) -> str:
    """The body's digest, as the seal names it: of its canonical JSON."""
    return digest(canonical(body.model_dump(mode="json")))
