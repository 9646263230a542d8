"""Needs, feasibility with reasons, ranking with its component scores, and the `plan` dry run."""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import CAMPAIGN_YAML, MODEL, SHA, cpu_fleet, peer

from protocol import ComputeUnit, Load, ModelRef
from scheduler import (
    Job,
    Misfit,
    Needs,
    PeerView,
    Requirements,
    Score,
    UnresolvedModelError,
    explain,
    feasible,
    needs_of,
    parse_campaign,
    rank,
)
from scheduler.language.verify import NOT_VERIFIED, Verify
from scheduler.state import plan_job
from scheduler.state.events import RecordOutcome
from scheduler.state.fanout import fanned
from scheduler.state.tasks import Status, TaskState

MB = 1024 * 1024
GPU = ComputeUnit.GPU_ONNX
CPU = ComputeUnit.CPU_ONNX


def job(unit: ComputeUnit = CPU, devices: str | int = "all", **require: object) -> Job:
    text = f"model: {{path: m.onnx}}\njobs: [{{compute_unit: {unit.value}}}]\n"
    base = parse_campaign(text).jobs[0]
    return base.with_(devices=devices, require=Requirements.model_validate(require))


def needs(unit: ComputeUnit = CPU, size_mb: int = 14, web: bool = True, **require: object) -> Needs:
    sources = ("https://example.org/m.onnx",) if web else ()
    model = ModelRef(name="m.onnx", size=size_mb * MB, sha256=SHA, sources=sources)
    return needs_of(job(unit, "all", **require), model)


@pytest.mark.parametrize(
    ("unit", "size_mb", "require", "ram", "vram"),
    [
        (CPU, 14, {}, 256 + 42, 0),
        (CPU, 14, {"min_ram_gb": 4}, 4096, 0),
        (CPU, 2000, {"min_ram_gb": 4}, 256 + 6000, 0),
        (GPU, 14, {}, 256 + 42, 256 + 28),
        (GPU, 14, {"min_vram_gb": 8}, 256 + 42, 8192),
        (ComputeUnit.GPU_COREML, 1, {}, 256 + 3, 256 + 2),
        (ComputeUnit.NE_COREML, 1, {}, 256 + 3, 0),
    ],
)
def test_needs_follow_the_documented_memory_rule(
    unit: ComputeUnit, size_mb: int, require: dict[str, object], ram: int, vram: int
) -> None:
    derived = needs(unit, size_mb, True, **require)
    assert (derived.min_ram_mb, derived.min_vram_mb) == (ram, vram)
    assert derived.runtime.value == ("onnxruntime" if "ONNX" in unit.value else "coremltools")


def test_needs_carry_os_peers_transfer_and_the_memory_limit() -> None:
    derived = needs(CPU, web=False, os=["Linux"], peers=["12D3-a"])
    assert (derived.os, derived.peers, derived.transfer) == (("Linux",), ("12D3-a",), "direct")
    assert needs(CPU).transfer == "url"
    limited = job().with_(spec=job().spec.with_(memory_limit_mb=5000))
    assert needs_of(limited, MODEL).min_ram_mb == 5000


CASES = [
    ("fits", peer("a"), needs(CPU), ()),
    (
        "GPU job on a CPU-only peer",
        cpu_fleet(1)[0],
        needs(GPU),
        (Misfit.UNIT_UNAVAILABLE,),
    ),
    (
        "unit never probed",
        peer("a"),
        needs(ComputeUnit.CPU_TORCH),
        (Misfit.UNIT_UNAVAILABLE,),
    ),
    (
        "wrong OS",
        peer("w", os="Windows"),
        needs(os=["Linux", "darwin"]),
        (Misfit.OS,),
    ),
    ("OS case-insensitive", peer("m", os="Darwin"), needs(os=["darwin"]), ()),
    ("too little RAM", peer("s", ram_gb=2), needs(min_ram_gb=4), (Misfit.RAM,)),
    (
        "too little GPU memory",
        peer("g", units=[GPU], gpu_vram_mb=1024),
        needs(GPU, size_mb=600),
        (Misfit.VRAM,),
    ),
    (
        "unified memory holds the GPU need in RAM",
        peer("u", units=[GPU], ram_gb=1),
        needs(GPU, size_mb=200),
        (Misfit.RAM,),
    ),
    ("not an allowed peer", peer("a"), needs(peers=["12D3-b"]), (Misfit.NOT_ALLOWED,)),
    (
        "stale advert",
        PeerView("12D3-old", peer("old").profile, age_s=900.0),
        needs(),
        (Misfit.STALE_ADVERT,),
    ),
    (
        "queue full",
        peer("q", load=Load(running=1, queued=4, max_queue=4)),
        needs(),
        (Misfit.QUEUE_FULL,),
    ),
    (
        "every reason, not just the first",
        peer("x", os="Windows", ram_gb=1, unavailable={GPU: "no GPU"}),
        needs(GPU, os=["Linux"], min_ram_gb=2),
        (Misfit.UNIT_UNAVAILABLE, Misfit.OS, Misfit.RAM),
    ),
]


@pytest.mark.parametrize(("candidate", "need", "codes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_feasibility_says_why(candidate: PeerView, need: Needs, codes: tuple[Misfit, ...]) -> None:
    verdict = feasible(need, candidate)
    assert (verdict.ok, verdict.codes) == (not codes, codes)
    assert all(reason.detail for reason in verdict.reasons)  # and says it for people


def idle(mb: int = 8192) -> Load:
    return Load(mem_available_mb=mb)


def test_ranking_puts_idle_before_busy_then_direct_before_relayed() -> None:
    busy_direct = peer("busy", load=Load(running=1, mem_available_mb=8192))
    idle_relayed = peer("relayed", reach="relayed", load=idle())
    idle_direct = peer("direct", load=idle())
    idle_unknown = peer("unknown", reach="unknown", load=idle())
    order = rank(needs(), [busy_direct, idle_relayed, idle_unknown, idle_direct])
    assert [r.peer.peer_id for r in order] == ["12D3-direct", "12D3-unknown", "12D3-relayed", "12D3-busy"]
    assert [r.score.reach for r in order] == [1.0, 0.75, 0.5, 1.0]
    assert [r.score.idle for r in order] == [1.0, 1.0, 1.0, 0.5]


def test_ranking_spreads_across_device_kinds_before_headroom() -> None:
    x1 = peer("x1", soc="Xeon", load=idle(16000))
    x2 = peer("x2", soc="Xeon", load=idle(15000))
    arm = peer("arm", soc="Apple M2", load=idle(4000))
    order = rank(needs(), [x1, x2, arm])
    assert [r.peer.peer_id for r in order] == ["12D3-x1", "12D3-arm", "12D3-x2"]
    assert [r.score.spread for r in order] == [1.0, 1.0, 0.0]


def test_ranking_keeps_component_scores_and_prefers_a_cached_model_then_headroom() -> None:
    roomy = peer("roomy", load=idle(8192))
    tight = peer("tight", load=idle(1024))
    cached = PeerView("12D3-cached", peer("cached").profile, idle(1024), "direct", 0.0, has_model=True)
    order = rank(needs(min_ram_gb=0.5), [tight, roomy, cached])
    assert [r.peer.peer_id for r in order] == ["12D3-cached", "12D3-roomy", "12D3-tight"]
    assert order[0].score == Score(idle=1.0, reach=1.0, spread=1.0, cached=1.0, headroom=0.5)
    assert order[1].score == Score(idle=1.0, reach=1.0, spread=0.0, cached=0.0, headroom=0.9375)
    assert order[2].score == Score(idle=1.0, reach=1.0, spread=0.0, cached=0.0, headroom=0.5)


def test_a_relayed_peer_that_needs_the_bytes_from_us_ranks_after_one_that_fetches_by_url() -> None:
    relayed = peer("r", reach="relayed", load=idle())
    assert rank(needs(web=True), [relayed])[0].score.reach == 0.5
    assert rank(needs(web=False), [relayed])[0].score.reach == 0.25


def test_ranking_counts_tasks_already_placed_as_load_and_leaves_out_infeasible_peers() -> None:
    a, b = peer("a", load=idle()), peer("b", load=idle())
    windows = peer("w", os="Windows")
    order = rank(needs(os=["Linux"]), [a, b, windows], placed={"12D3-a": 2})
    assert [(r.peer.peer_id, r.score.idle) for r in order] == [("12D3-b", 1.0), ("12D3-a", 0.3333)]


@pytest.mark.parametrize(
    ("devices", "chosen", "shortfall"),
    [
        ("all", 3, ""),
        ("any", 1, ""),
        (2, 2, ""),
        (5, 3, "devices: 5 distinct peers wanted, 3 feasible"),
    ],
)
def test_fan_out_per_devices(devices: str | int, chosen: int, shortfall: str) -> None:
    plan = plan_job(job(devices=devices), needs(), cpu_fleet(3))
    assert (len(plan.chosen), plan.shortfall) == (chosen, shortfall)
    assert len({r.peer.peer_id for r in plan.chosen}) == chosen


def test_explain_lists_matching_peers_and_every_rejection_with_its_reason() -> None:
    campaign = parse_campaign(CAMPAIGN_YAML)
    plan = explain(campaign, {"mobilenet": MODEL}, cpu_fleet(3))
    cpu_job, gpu_job = plan.jobs
    assert [r.peer.peer_id for r in cpu_job.chosen] == ["12D3-cpu0", "12D3-cpu1", "12D3-cpu2"]
    assert (cpu_job.rejected, cpu_job.shortfall) == ((), "")
    assert gpu_job.chosen == ()
    assert gpu_job.shortfall == "no feasible peer among 3"
    assert [(r.peer_id, tuple(x.code for x in r.reasons)) for r in gpu_job.rejected] == [
        (f"12D3-cpu{i}", (Misfit.UNIT_UNAVAILABLE,)) for i in range(3)
    ]


def test_explain_with_no_peers_says_so() -> None:
    plan = explain(parse_campaign(CAMPAIGN_YAML), {"mobilenet": MODEL}, [])
    assert [j.shortfall for j in plan.jobs] == ["no peers discovered", "no peers discovered"]


def test_explain_refuses_unpinned_or_contradicting_models() -> None:
    campaign = parse_campaign(CAMPAIGN_YAML)
    with pytest.raises(UnresolvedModelError) as missing:
        explain(campaign, {}, [])
    assert missing.value.missing == ("mobilenet",)
    other = MODEL.with_(sha256="cd" * 32)
    with pytest.raises(UnresolvedModelError) as mismatched:
        explain(campaign, {"mobilenet": other}, [])
    assert mismatched.value.mismatched == ("mobilenet",)


CLAIMED = "challenge: n=512 x 137 steps, 26.8 GFLOPS measured against 245 claimed"


def _claimed(view: PeerView) -> PeerView:
    return dataclasses.replace(view, claim=(CLAIMED,))


@pytest.mark.parametrize(
    ("verify", "unverifiable"),
    [
        (Verify(replicas=2, same_host="allow"), True),  # asked verified: the figure asked cannot be had
        (Verify(spot_check=0.5), True),
        (Verify(reference=("12D3-ref",)), True),
        (NOT_VERIFIED, False),  # nothing asked: the peers do not fit, an Unschedulable task
    ],
)
def test_peers_that_fit_but_for_verification_make_a_verified_job_unverifiable(
    verify: Verify, unverifiable: bool
) -> None:
    plan = plan_job(job(devices=2), needs(), [_claimed(p) for p in cpu_fleet(2)], verify=verify)
    assert plan.chosen == ()
    assert plan.unverifiable is unverifiable
    if unverifiable:  # the rule and the field that would allow it, once
        assert plan.shortfall == (
            "no feasible peer among 2; 2 peer(s) that fit refused by verification: "
            f"claim_unverified: {CLAIMED} (verify: {{unverified: allow}} places it)"
        )
    else:
        assert plan.shortfall == "no feasible peer among 2"


def test_a_peer_refused_for_more_than_verification_leaves_the_job_unschedulable() -> None:
    """A peer that would not fit anyway (no GPU for a GPU job) is no verification's refusal."""
    peers = [_claimed(p) for p in cpu_fleet(2)]
    plan = plan_job(job(GPU), needs(GPU), peers, verify=Verify(replicas=2))
    assert (plan.unverifiable, plan.shortfall) == (False, "no feasible peer among 2")


def test_a_verified_job_short_of_peers_for_verification_ends_its_tasks_unverifiable() -> None:
    plan = plan_job(job(devices=2), needs(), [_claimed(p) for p in cpu_fleet(2)], verify=Verify(replicas=2))
    model = ModelRef(name="m.onnx", size=14 * MB, sha256=SHA)
    tasks, commands = fanned("c1", plan, model, now=5.0)
    assert [t.state for t in tasks] == [TaskState.UNVERIFIABLE, TaskState.UNVERIFIABLE]
    assert {c.status for c in commands if isinstance(c, RecordOutcome)} == {Status.UNVERIFIABLE}
