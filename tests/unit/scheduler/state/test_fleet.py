"""Fleet load's pure arithmetic: the seeded schedule, its deal, clock offsets, the fleet columns,
the merged row from raw records, and `fleet:` in a campaign."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from kit.scheduler_harness import KEY, Node, cpu_fleet

from protocol import Endpoint, GenerateSpec, ModelRef, Prompt, RequestRecord
from protocol.arrivals import SplitMix64, arrivals
from protocol.clientload import request_rate_achieved
from protocol.genstats import summarize_generation
from scheduler import CampaignError, Scheduler, SendOffer, TaskView, parse_campaign
from scheduler.results import Member, fleet_columns, fleet_rows
from scheduler.results.columns import cell
from scheduler.state import (
    ClockRound,
    TaskState,
    clock_offset,
    deal,
    lag_p99_ms,
    saturated,
    still_ahead,
)

PROMPTS = (Prompt(id="a", text="one"), Prompt(id="b", text="two"))


def _spec(**fields: object) -> GenerateSpec:
    values: dict[str, object] = {"prompts": PROMPTS, "prompts_sha256": "0" * 64, "duration_s": 10.0}
    values |= {"endpoint": Endpoint(model="m", url="http://127.0.0.1:1"), "fleet_size": 2}
    return GenerateSpec.model_validate(values | fields)


def test_splitmix64_is_the_published_sequence_and_seeded() -> None:
    # SplitMix64 from seed 0: first output 0xE220A8397B1DCDAF (Vigna's reference implementation)
    assert SplitMix64(0).next_float() == (0xE220A8397B1DCDAF >> 11) / float(1 << 53)
    a, b = SplitMix64(7), SplitMix64(7)
    assert [a.next_float() for _ in range(5)] == [b.next_float() for _ in range(5)]


def test_poisson_arrivals_are_seeded_within_the_window_at_the_rate() -> None:
    times = arrivals(200.0, 20.0, seed=3)
    assert times == arrivals(200.0, 20.0, seed=3)
    assert times != arrivals(200.0, 20.0, seed=4)
    assert times[0] == 0.0
    assert list(times) == sorted(times)
    assert times[-1] < 20.0
    assert abs(len(times) - 4_000) < 4 * math.sqrt(4_000)  # Poisson count: mean 4,000, sd 63
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    assert abs(mean - 1 / 200) < 0.0002
    assert abs(sum((g - mean) ** 2 for g in gaps) / len(gaps) - mean**2) < 0.1 * mean**2  # exponential
    assert len(arrivals(1000.0, 100.0, seed=1, limit=50)) == 50


def test_the_deal_partitions_the_schedule_round_robin() -> None:
    spec = _spec(request_rate=20.0)
    deals = [deal(spec, 3, m, seed=9, start_at=1000.0) for m in range(3)]
    whole = arrivals(20.0, 10.0, 9)
    assert sorted(t for d in deals for t in d.planned_s) == sorted(whole)
    assert sorted(i for d in deals for i in d.prompts) == list(range(len(whole)))
    for d in deals:
        assert (d.size, d.seed, d.start_at, d.slots) == (3, 9, 1000.0, 0)
        assert all(whole[i] == t for i, t in zip(d.prompts, d.planned_s, strict=True))
        assert all(i % 3 == d.member for i in d.prompts)


def test_a_member_offered_late_is_dealt_only_the_sends_still_ahead() -> None:
    whole = deal(_spec(request_rate=20.0), 2, 1, seed=9, start_at=1000.0)
    assert still_ahead(whole, 995.0, 1.0) == whole  # offered before the start: every send is ahead
    late = still_ahead(whole, 1003.0, 1.0)  # offered 3 s after the start instant
    assert late.planned_s == tuple(t for t in whole.planned_s if t >= 4.0)
    assert late.prompts == tuple(i for i, t in zip(whole.prompts, whole.planned_s, strict=True) if t >= 4.0)
    assert 0 < len(late.planned_s) < len(whole.planned_s)
    assert still_ahead(whole, 1020.0, 1.0).planned_s == ()  # after the run: nothing to send


def test_a_closed_loop_deal_gives_each_member_c_slots() -> None:
    d = deal(_spec(concurrency=4), 2, 1, seed=1, start_at=5.0)
    assert (d.slots, d.planned_s, d.member) == (4, (), 1)


def test_the_clock_offset_is_the_tightest_rounds_midpoint_with_half_its_trip() -> None:
    rounds = [
        ClockRound(sent=100.0, worker=150.4, received=100.8),  # trip 0.8
        ClockRound(sent=101.0, worker=151.06, received=101.1),  # trip 0.1: the one kept
        ClockRound(sent=102.0, worker=152.0, received=101.9),  # received before sent: ignored
    ]
    offset, bound = clock_offset(rounds) or (None, None)
    assert offset == pytest.approx(50.01)
    assert bound == pytest.approx(0.05)
    assert clock_offset([]) is None


def _record(planned: float, started: float, ok: bool = True, ttft: float = 50.0) -> RequestRecord:
    return RequestRecord(
        prompt_id="a",
        prompt_tokens=3,
        output_tokens=4,
        ttft_ms=ttft,
        e2e_ms=ttft + 30,
        token_times_ms=(ttft, ttft + 10, ttft + 20, ttft + 30),
        started_s=started,
        planned_s=planned,
        error=None if ok else "connect",
    )


def test_lag_rate_and_saturation_from_raw_records() -> None:
    records = [_record(i * 0.1, i * 0.1 + 0.002) for i in range(100)] + [_record(9.0, 11.0)]
    assert lag_p99_ms(records) == pytest.approx(2.0)  # 100 sent 2 ms late, one 2 s late: p99 is 2 ms
    assert saturated(95.0, 1.0)
    assert saturated(10.0, 11.0)
    assert not saturated(None, 9.9)
    columns = fleet_columns(records, _spec(request_rate=10.0), 2, [20.0, None, 35.5], ["x (p): Failed"])
    assert columns["FleetSize"] == "2"
    assert columns["ClientCpuMaxPct"] == "35.5"
    assert columns["RequestRateAchieved"] == "10.000"  # the one sent after 10 s is not in
    assert columns["RequestRateAchieved"] == cell("RequestRateAchieved", request_rate_achieved(records, 10.0))
    assert columns["FleetLost"] == "x (p): Failed"


def _member(n: int, records: list[RequestRecord] | None, spec: GenerateSpec) -> Member:
    model = ModelRef(name="m", size=0, sha256="ab" * 32, sources=("endpoint:black-box",))
    task = TaskView(
        task_id=f"c-job-0-{n}",
        job_index=0,
        unit="CPU (ONNX)",
        model=model,
        state=TaskState.DONE if records is not None else TaskState.FAILED,
        peer_id=f"peer{n}",
        device_name=f"dev{n}",
        failure_reason="" if records is not None else "lease_lapsed",
    )
    row = {"JobId": task.task_id, "Status": "Complete" if records is not None else "Failed"}
    stats = None if records is None else summarize_generation(records, 10.0, spec)
    return Member(task, row, stats)


def test_the_merged_row_takes_percentiles_over_all_requests_not_medians_of_members() -> None:
    text = (
        "jobs:\n- endpoint: {url: 'http://127.0.0.1:1', model: m}\n"
        "  generate: {prompts: 'builtin:summaries', request_rate: 10, duration_s: 10}\n  fleet: 3\n"
    )
    job = parse_campaign(text).jobs[0]
    spec = job.spec.generate
    assert spec is not None
    fast = [_record(i * 0.2, i * 0.2, ttft=10.0) for i in range(3)]  # member 0: median TTFT 10
    slow = [_record(i * 0.2 + 0.1, i * 0.2 + 0.1, ttft=100.0) for i in range(2)]  # member 1: 100
    members = [_member(0, fast, spec), _member(1, slow, spec), _member(2, None, spec)]
    updated, [merged] = fleet_rows([job], {0: members}, "2026-01-01T00:00:00Z")
    assert merged["ComputeUnits"] == "Endpoint (fleet)"
    assert merged["Status"] == "Complete"
    assert merged["Requests"] == "5"
    assert merged["TtftMsMedian"] == "10.000"  # the median of all five, not (10 + 100) / 2
    assert merged["FleetSize"] == "3"
    assert "peer2" in merged["FleetLost"]
    assert "lost: dev2 (peer2)" in merged["Detail"]
    assert merged["WorkerPeerId"] == "peer0;peer1"
    assert merged["RequestRateAchieved"] == "0.500"
    assert merged["ScheduleLagMsP99"] == "0.000"
    assert updated["c-job-0-0"]["RequestRateAchieved"] == "0.300"  # each member's own records
    assert updated["c-job-0-1"]["FleetSize"] == "3"
    assert updated["c-job-0-2"]["FleetSize"] == "3"


@pytest.mark.parametrize(
    ("fleet", "extra", "path"),
    [
        ("0", {}, "jobs[0].fleet"),
        ('"some"', {}, "jobs[0].fleet"),
        ("{workers: 2, seed: -1}", {}, "jobs[0].fleet.seed"),
        ("{workers: 2, sed: 1}", {}, "jobs[0].fleet.sed"),
        ("2", {"devices": 2}, "jobs[0].devices"),
        ("2", {"no_duration": True}, "jobs[0].generate.duration_s"),
        ("1", {"rate": 10_000}, "jobs[0].generate.request_rate"),  # 30,000 requests for one member
    ],
)
def test_a_bad_fleet_is_named_at_its_path(fleet: str, extra: dict[str, object], path: str) -> None:
    duration = "" if extra.get("no_duration") else ", duration_s: 3"
    rate = extra.get("rate", 5)
    devices = f"\n  devices: {extra['devices']}" if "devices" in extra else ""
    text = (
        "jobs:\n- endpoint: {url: 'http://127.0.0.1:1', model: m}\n"
        f"  generate: {{prompts: 'builtin:summaries', request_rate: {rate}{duration}}}\n"
        f"  fleet: {fleet}{devices}\n"
    )
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text)
    assert path in [p.path for p in caught.value.problems], json.dumps(
        [str(p) for p in caught.value.problems]
    )


def test_fleet_all_places_on_every_feasible_peer_with_its_seed() -> None:
    text = (
        "jobs:\n- endpoint: {url: 'http://127.0.0.1:1', model: m}\n"
        "  generate: {prompts: 'builtin:summaries', concurrency: 2, duration_s: 3}\n"
        "  fleet: {workers: all, seed: 11}\n"
    )
    job = parse_campaign(text).jobs[0]
    assert job.devices == "all"
    assert job.spec.generate is not None
    assert (job.spec.generate.fleet_size, job.spec.generate.fleet_seed) == (0, 11)


@pytest.mark.parametrize("leaves", ["commit", "release"])  # goes silent (lapses), or hands its lease back
@pytest.mark.parametrize(("fleet", "statuses"), [
    ("fleet: 1", ["Failed"]),  # a fleet member's moment has passed: not replaced
    ("devices: 1", ["Complete"]),  # the same job without fleet: retried on the other peer
])  # fmt: skip
def test_a_fleet_member_that_leaves_is_lost_not_replaced(
    fleet: str, statuses: list[str], leaves: str
) -> None:
    text = (
        "jobs:\n- endpoint: {url: 'http://127.0.0.1:1', model: m}\n"
        f"  generate: {{prompts: 'builtin:summaries', request_rate: 5, duration_s: 3}}\n  {fleet}\n"
    )
    node = Node(Scheduler("c", parse_campaign(text), {}, key=KEY))
    peers = cpu_fleet(2)
    node.scripts = {peers[0].peer_id: [leaves]}  # the first one offered leaves after its commit
    node.discover(peers)
    node.run()
    assert [o.status.value for o in node.outcomes().values()] == statuses
    assert (len(node.sent(SendOffer)) == 1) == (statuses == ["Failed"])  # no spare fires its sends
    if statuses == ["Failed"]:
        [task] = node.scheduler.tasks()
        assert task.failure_reason == ("released" if leaves == "release" else "lease_lapsed")
        assert task.peer_id == peers[0].peer_id  # the row (and FleetLost) names the member that left
        assert "not replaced" in task.detail
