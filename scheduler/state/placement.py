"""Placement: which peers can take a job (and why the others cannot), in what order, and the plan.

Feasibility is a list of small checks, each returning the reason a peer is rejected or None; a
peer is feasible when every check passes, and a rejected peer keeps every reason, not just the
first. Ranking orders feasible peers by a key whose components are kept for display:

1. ``idle``: 1 / (1 + running + queued + tasks this campaign already placed there): idle before busy;
2. ``reach``: direct 1.0, unknown 0.75, relayed 0.5 (0.25 if the model must come from the submitter);
3. ``spread``: 1.0 if no peer of the same device kind is ahead in this ranking: spread across kinds;
4. ``cached``: 1.0 if the peer already holds the model;
5. ``headroom``: the fraction of memory left after the job's need: more headroom first;

then the peer id, so equal peers always come out in the same order. Spread sits above headroom
because headroom is continuous: below it, spread would never decide anything.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from protocol import ComputeUnit, DeviceProfile, Endpoint, Load, ModelRef, Owner, Reachability
from scheduler.language.campaign import Campaign, Job
from scheduler.language.needs import Needs, campaign_needs
from scheduler.language.verify import NOT_VERIFIED, Verify
from scheduler.state.replication import NO_GAP, ReferenceGap, place_groups, reference_gap, spot_checkable


@dataclass(frozen=True)
class PeerView:
    """A candidate as the node sees it: its signed profile, current load and how to reach it.

    Attributes:
        peer_id: the libp2p peer id.
        profile: the device profile from its (verified) advert.
        load: its latest load (advert or ``/sark/profile``).
        reachability: as its advert says.
        age_s: how old the freshest information about it is, in seconds.
        has_model: it already caches the campaign's model.
        host: the IP address the submitter's connection to it came from ("" unknown): replicas of
            one task come from distinct hosts (`scheduler.verification.replicas`).
        claim: why its advertised device is not believed (`scheduler.verification.claims`; empty: believed).
        owner: who owns it, from its advert's statement as the submitter checked it (`protocol.owner_of`:
            none stated, its own owner; a refused statement keeps it from every job).
        challenged: what its answered challenges measured, one line a unit (the claim, the best
            round's figure, why refused): the evidence bundle.json keeps beside `claim`.
        challenge_again_by: when (the scheduler's clock) a verdict of its next challenge is due, if
            its claim was refused by a challenge that will be tried again (0: none will); set by the
            submitter from its own clock and constants (`node.submitter.challenge`), never from
            anything the peer reports. A job short of such peers waits for them (`open_refusals`).
    """

    peer_id: str
    profile: DeviceProfile
    load: Load = field(default_factory=Load)
    reachability: Reachability = Reachability.UNKNOWN
    age_s: float = 0.0
    has_model: bool = False
    host: str = ""
    claim: tuple[str, ...] = ()
    owner: Owner = field(default_factory=Owner)
    challenged: tuple[str, ...] = ()
    challenge_again_by: float = 0.0


class Misfit(enum.StrEnum):
    """Why a peer cannot take a job: the code of a placement reason (tests and tools read the code)."""

    UNIT_UNAVAILABLE = "unit_unavailable"
    NO_ENDPOINT = "no_endpoint"
    OS = "os"
    RAM = "ram"
    VRAM = "vram"
    NOT_ALLOWED = "not_allowed"
    STALE_ADVERT = "stale_advert"
    QUEUE_FULL = "queue_full"
    CLAIM_UNVERIFIED = "claim_unverified"
    OWNER_REFUSED = "owner_refused"


@dataclass(frozen=True)
class Reason:
    """One reason a peer was rejected: a code, and a detail for people (its wording may change)."""

    code: Misfit
    detail: str

    def __str__(self) -> str:
        return self.detail


@dataclass(frozen=True)
class Verdict:
    """Whether a peer can take a job; if not, every reason why."""

    ok: bool
    reasons: tuple[Reason, ...] = ()

    @property
    def codes(self) -> tuple[Misfit, ...]:
        """The reasons' codes, in check order."""
        return tuple(r.code for r in self.reasons)


@dataclass(frozen=True)
class Score:
    """The ranking components of one feasible peer (see the module docstring)."""

    idle: float
    reach: float
    spread: float
    cached: float
    headroom: float

    def key(self, peer_id: str) -> tuple[float, float, float, float, float, str]:
        """Sort key: best first."""
        return (-self.idle, -self.reach, -self.spread, -self.cached, -self.headroom, peer_id)


@dataclass(frozen=True)
class Ranked:
    """A feasible peer and its score."""

    peer: PeerView
    score: Score


@dataclass(frozen=True)
class Rejection:
    """A peer that cannot take a job, and every reason."""

    peer_id: str
    device_name: str
    reasons: tuple[Reason, ...]

    @property
    def details(self) -> tuple[str, ...]:
        """The reasons for people."""
        return tuple(r.detail for r in self.reasons)


@dataclass(frozen=True)
class JobPlan:
    """One job's placement: who gets its tasks, who else would fit, who cannot and why.

    Attributes:
        job: the job.
        needs: its needs.
        chosen: the peers that get a task, best first.
        matching: every feasible peer, ranked (chosen ones included).
        rejected: every other peer with its reasons.
        wanted: how many tasks the job wants (len(matching) for "all", at least 1).
        shortfall: why fewer than `wanted` peers were chosen, or "".
        verify: how its results are verified; a replicated job's chosen peers come in groups of
            `verify.replicas` (`scheduler.state.replication`).
        unverifiable: the shortfall is verification's (tasks end `Unverifiable`): too few independent
            peers for a quorum, or peers that fit refused by verification (`VERIFICATION_MISFITS`).
        gap: the classes a missing named reference holds back (`replication.reference_gap`).
        awaiting: with `unverifiable`, the peers refused by a challenge that will be tried again
            (`open_refusals`): the job waits for their next verdict before it ends so.
    """

    job: Job
    needs: Needs
    chosen: tuple[Ranked, ...]
    matching: tuple[Ranked, ...]
    rejected: tuple[Rejection, ...]
    wanted: int
    shortfall: str = ""
    verify: Verify = NOT_VERIFIED
    unverifiable: bool = False
    gap: ReferenceGap = NO_GAP
    awaiting: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The dry run of a campaign against the peers known now: the ``plan`` command."""

    campaign: Campaign
    jobs: tuple[JobPlan, ...]


def unit_problem(unit: ComputeUnit, profile: DeviceProfile) -> str | None:
    """Why a device cannot run `unit` (not probed, or its probe failed), or None if it can.

    Placement asks it of a peer's advert; a worker's admission asks it of its own profile.
    """
    if unit in profile.usable_units():
        return None
    status = profile.unit_status(unit)
    if status is None:
        return f"{unit.value} not probed on this device"
    return f"{unit.value} unavailable: {status.reason or 'its probe failed'}"


def endpoint_problem(endpoint: Endpoint, profile: DeviceProfile) -> str | None:
    """Why a device cannot measure an endpoint, or None if it can.

    A black-box URL can be reached from anywhere (the worker's URL policy decides, at run time); a
    gray-box model needs a server the device's owner declared whose probe served that model.
    """
    if endpoint.url is not None:
        return None
    served = [s for s in profile.endpoints if s.model == endpoint.model]
    if any(s.usable for s in served):
        return None
    if served:
        return f"the declared server for {endpoint.model} failed its probe: {served[0].reason}"
    return f"no declared server here serves {endpoint.model}"


def _check_unit(needs: Needs, peer: PeerView) -> Reason | None:
    if needs.endpoint is not None:
        problem = endpoint_problem(needs.endpoint, peer.profile)
        return None if problem is None else Reason(Misfit.NO_ENDPOINT, problem)
    problem = unit_problem(needs.unit, peer.profile)
    return None if problem is None else Reason(Misfit.UNIT_UNAVAILABLE, problem)


def _check_os(needs: Needs, peer: PeerView) -> Reason | None:
    allowed = {name.lower() for name in needs.os}
    if not allowed or peer.profile.os.lower() in allowed:
        return None
    return Reason(Misfit.OS, f"OS {peer.profile.os} not in {', '.join(needs.os)}")


def _ram_need_mb(needs: Needs, profile: DeviceProfile) -> int:
    unified = needs.min_vram_mb if profile.vram_mb() == 0 else 0
    return needs.min_ram_mb + unified


def _check_ram(needs: Needs, peer: PeerView) -> Reason | None:
    need = _ram_need_mb(needs, peer.profile)
    if peer.profile.ram_mb >= need:
        return None
    return Reason(Misfit.RAM, f"RAM {peer.profile.ram_mb} MB < {need} MB needed")


def _check_vram(needs: Needs, peer: PeerView) -> Reason | None:
    have = peer.profile.vram_mb()
    if needs.min_vram_mb == 0 or have == 0 or have >= needs.min_vram_mb:
        return None
    return Reason(Misfit.VRAM, f"GPU memory {have} MB < {needs.min_vram_mb} MB needed")


def _check_allowed(needs: Needs, peer: PeerView) -> Reason | None:
    if not needs.peers or peer.peer_id in needs.peers:
        return None
    return Reason(Misfit.NOT_ALLOWED, "not in the job's require.peers")


def _check_fresh(needs: Needs, peer: PeerView) -> Reason | None:
    if peer.age_s <= needs.max_advert_age_s:
        return None
    detail = f"advert {peer.age_s:.0f} s old (limit {needs.max_advert_age_s:.0f} s)"
    return Reason(Misfit.STALE_ADVERT, detail)


def _check_queue(needs: Needs, peer: PeerView) -> Reason | None:
    load = peer.load
    if load.running == 0 or load.queued < load.max_queue:
        return None
    return Reason(Misfit.QUEUE_FULL, f"queue full ({load.queued} of {load.max_queue} queued)")


def _check_claim(needs: Needs, peer: PeerView) -> Reason | None:
    if not peer.claim or needs.allow_unverified:
        return None
    why = "; ".join(peer.claim)
    return Reason(
        Misfit.CLAIM_UNVERIFIED, f"claim_unverified: {why} (verify: {{unverified: allow}} places it)"
    )


def _check_owner(needs: Needs, peer: PeerView) -> Reason | None:
    """A peer whose owner statement did not verify lied about who owns it: never placed."""
    return Reason(Misfit.OWNER_REFUSED, peer.owner.refused) if peer.owner.refused else None


CHECKS: Final[tuple[Callable[[Needs, PeerView], Reason | None], ...]] = (
    _check_unit,
    _check_os,
    _check_ram,
    _check_vram,
    _check_allowed,
    _check_fresh,
    _check_queue,
    _check_claim,
    _check_owner,
)


def feasible(needs: Needs, peer: PeerView) -> Verdict:
    """Run every check; the peer is feasible if none objects."""
    reasons = tuple(reason for check in CHECKS if (reason := check(needs, peer)) is not None)
    return Verdict(ok=not reasons, reasons=reasons)


def device_kind(profile: DeviceProfile) -> str:
    """What counts as "the same kind of device" for spreading: SoC, OS and GPUs."""
    gpus = "+".join(sorted(g.name for g in profile.gpus))
    return f"{profile.soc}|{profile.os}|{gpus}"


def _headroom(needs: Needs, peer: PeerView) -> float:
    available = peer.load.mem_available_mb or peer.profile.ram_mb
    need = _ram_need_mb(needs, peer.profile)
    fractions = [(available - need) / available if available else 0.0]
    vram = peer.profile.vram_mb()
    if needs.min_vram_mb and vram:
        fractions.append((vram - needs.min_vram_mb) / vram)
    return round(max(0.0, min(1.0, min(fractions))), 4)


def _reach(needs: Needs, peer: PeerView) -> float:
    if peer.reachability == Reachability.DIRECT:
        return 1.0
    if peer.reachability == Reachability.RELAYED:
        return 0.5 if needs.transfer == "url" or peer.has_model else 0.25
    return 0.75


def score(needs: Needs, peer: PeerView, *, placed: int = 0, kind_taken: bool = False) -> Score:
    """The ranking components of one peer (its feasibility is not checked here)."""
    busy = peer.load.running + peer.load.queued + placed
    return Score(
        idle=round(1.0 / (1 + busy), 4),
        reach=_reach(needs, peer),
        spread=0.0 if kind_taken else 1.0,
        cached=1.0 if peer.has_model else 0.0,
        headroom=_headroom(needs, peer),
    )


def rank(needs: Needs, peers: Sequence[PeerView], *, placed: Mapping[str, int] | None = None) -> list[Ranked]:
    """Order the feasible peers best first; infeasible ones are left out (see `explain` for why).

    Args:
        needs: the job's needs.
        peers: the candidates.
        placed: tasks this campaign already placed on each peer, counted as load.

    Returns:
        Feasible peers, best first, each with its score. Spread is relative to the peers ahead.
    """
    placed = placed or {}
    left = [p for p in peers if feasible(needs, p).ok]
    kinds: set[str] = set()
    ranked: list[Ranked] = []
    while left:
        scored = [
            Ranked(
                p,
                score(needs, p, placed=placed.get(p.peer_id, 0), kind_taken=device_kind(p.profile) in kinds),
            )
            for p in left
        ]
        best = min(scored, key=lambda r: r.score.key(r.peer.peer_id))
        ranked.append(best)
        kinds.add(device_kind(best.peer.profile))
        left.remove(best.peer)
    return ranked


def plan_job(
    job: Job,
    needs: Needs,
    peers: Sequence[PeerView],
    *,
    placed: Mapping[str, int] | None = None,
    verify: Verify = NOT_VERIFIED,
    now: float = 0.0,
) -> JobPlan:
    """Place one job: fan out per ``devices``, and say why any shortfall and every rejection; a
    shortfall that is verification's names the peers whose challenge is tried again after `now`
    (`awaiting`; the dry run's 0: every one its views announce)."""
    matching = tuple(rank(needs, peers, placed=placed))
    rejected = tuple(
        Rejection(p.peer_id, p.profile.device_name, verdict.reasons)
        for p in peers
        if not (verdict := feasible(needs, p)).ok
    )
    unit = job.spec.compute_unit
    gap = reference_gap(peers, [r.peer for r in matching], unit, verify) if verify.replicated else NO_GAP
    if verify.replicas > 1 and needs.replicable and matching:
        groups = place_groups(matching, job.devices, unit, verify, gap)
        short = groups.shortfall  # peers fit, but too few independent ones: unverifiable
        waits = open_refusals(rejected, peers, now) if short else ()
        chosen, wanted = groups.chosen, groups.wanted
        return JobPlan(job, needs, chosen, matching, rejected, wanted, short, verify, bool(short), gap, waits)
    if job.devices == "all":
        wanted = max(1, len(matching))
    elif job.devices == "any":
        wanted = 1
    else:
        wanted = job.devices
    pool = matching
    if verify.spot_check > 0 and needs.replicable and matching:
        pool, why = spot_checkable(matching, unit, verify, gap)
        if len(pool) < wanted:  # peers fit, but none could check some: unverifiable
            waits = open_refusals(rejected, peers, now)
            return JobPlan(job, needs, pool, matching, rejected, wanted, why, verify, True, gap, waits)
    chosen = pool[:wanted]
    shortfall = ""
    if not peers:
        shortfall = "no peers discovered"
    elif not matching:
        shortfall = f"no feasible peer among {len(peers)}"
    elif len(chosen) < wanted:
        shortfall = f"devices: {wanted} distinct peers wanted, {len(matching)} feasible"
    refused = _refused_by_verification(rejected) if shortfall and verify != NOT_VERIFIED else ()
    if refused:  # verified figures asked, and peers that fit but for their verification refused
        why = f"{shortfall}; {_verification_shortfall(refused)}"
        waits = open_refusals(rejected, peers, now)
        return JobPlan(job, needs, chosen, matching, rejected, wanted, why, verify, True, NO_GAP, waits)
    return JobPlan(job, needs, chosen, matching, rejected, wanted, shortfall, verify)


VERIFICATION_MISFITS: Final = frozenset({Misfit.CLAIM_UNVERIFIED, Misfit.OWNER_REFUSED})
"""The reasons that are verification's: the campaign asked for verified figures and these peers
could not give them (a claim a challenge, physics or the class did not bear out; an owner statement
that did not verify). A peer refused for these alone would otherwise fit."""


def open_refusals(rejected: Sequence[Rejection], peers: Sequence[PeerView], now: float) -> tuple[str, ...]:
    """The rejected peers whose only reason is a claim a challenge refused and will challenge again
    (`PeerView.challenge_again_by` after `now`), in order: a verified job short of peers waits for
    their next verdict instead of ending `Unverifiable` at once (issue 49: an honest device slowed by
    other work when first asked is challenged again later in the campaign, not refused for the whole of
    it). The time is the submitter's own schedule; a refusal by physics, the class, the owner
    statement, or a peer's last challenge is final, and so is one whose due time has passed."""
    again = {p.peer_id: p.challenge_again_by for p in peers}
    return tuple(
        r.peer_id
        for r in rejected
        if r.reasons
        and all(x.code == Misfit.CLAIM_UNVERIFIED for x in r.reasons)
        and again.get(r.peer_id, 0.0) > now
    )


def awaited_until(plan: JobPlan, peers: Sequence[PeerView]) -> float:
    """When the last verdict a job waits for is due (`open_refusals`; 0: it waits for none)."""
    again = {p.peer_id: p.challenge_again_by for p in peers}
    return max((again.get(peer, 0.0) for peer in plan.awaiting), default=0.0)


def _refused_by_verification(rejected: Sequence[Rejection]) -> tuple[Rejection, ...]:
    """The rejected peers that fit but for verification's reasons."""
    return tuple(r for r in rejected if r.reasons and all(x.code in VERIFICATION_MISFITS for x in r.reasons))


def _verification_shortfall(refused: Sequence[Rejection]) -> str:
    """Why a verified job has too few peers: how many fit but for verification, and the first one's
    reason, which names the rule and the field that would allow it (every reason is in the plan's
    rejections)."""
    return f"{len(refused)} peer(s) that fit refused by verification: {refused[0].reasons[0].detail}"


def plan_campaign(
    campaign: Campaign, needs: Sequence[Needs], peers: Sequence[PeerView], now: float = 0.0
) -> tuple[JobPlan, ...]:
    """Place every job in order; a job's chosen peers count as load for the jobs after it."""
    placed: dict[str, int] = {}
    plans = []
    for job, job_needs in zip(campaign.jobs, needs, strict=True):
        plan = plan_job(job, job_needs, peers, placed=placed, verify=campaign.verify_of(job), now=now)
        for ranked in plan.chosen:
            placed[ranked.peer.peer_id] = placed.get(ranked.peer.peer_id, 0) + 1
        plans.append(plan)
    return tuple(plans)


def explain(campaign: Campaign, models: Mapping[str, ModelRef], peers: Sequence[PeerView]) -> Plan:
    """The dry run: per job, the peers that would get its tasks, the others that fit, and why the rest do not.

    Raises:
        UnresolvedModelError: a campaign model has no pinned `ModelRef`.
    """
    return Plan(campaign, plan_campaign(campaign, campaign_needs(campaign, models), peers))
