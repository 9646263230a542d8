"""A fleet member's side against the scripted loopback server: its deal sent on the submitter's clock.

Real clocks and a real socket: what holds here holds whatever the machine's load (nothing sent before
its time, each planned send recorded with its lag). That each send is on time, to the instant, is
pinned on trio's virtual clock (tests/unit/drivers/endpoint/test_fleet_clock.py): a bound on the lag
here would read the machine's weather."""

from __future__ import annotations

import time

import trio
from kit.sse_server import Reply, scheduled, serve_sse

from drivers.endpoint.load import EndpointOptions, drive_endpoint
from protocol import Endpoint, FleetDeal, GenerateSpec, Prompt

PROMPTS = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(3))
OFFSET_S = 1000.0  # this worker's clock as if it ran 1000 s ahead of the submitter's


def _spec(deal: FleetDeal, **fields: object) -> GenerateSpec:
    values: dict[str, object] = {"prompts": PROMPTS, "prompts_sha256": "0" * 64, "duration_s": 1.0}
    values |= {"endpoint": Endpoint(model="tiny"), "fleet_size": 2, "deal": deal}
    return GenerateSpec.model_validate(values | fields)


def _script(body: dict[str, object], attempt: int) -> Reply:
    return scheduled(["a", "b"], first_s=0.01, usage=(3, 2))


async def test_a_member_waits_for_the_instant_and_sends_each_request_at_its_planned_time() -> None:
    lead = 0.4  # the instant, in the submitter's time base, is this far ahead
    start_at = time.time() - OFFSET_S + lead  # submitter clock = worker clock - offset
    planned = (0.0, 0.05, 0.1, 0.3)
    deal = FleetDeal(
        size=2,
        member=1,
        seed=1,
        start_at=start_at,
        offset_s=OFFSET_S,
        planned_s=planned,
        prompts=(1, 3, 5, 7),
    )
    spec = _spec(deal, request_rate=4.0)
    with serve_sse(_script) as server:
        began = trio.current_time()
        run = await drive_endpoint(spec, server.url, 20.0, EndpointOptions(rtt_samples=1))
    assert trio.current_time() - began >= lead + planned[-1]  # nothing went before its time
    assert sorted(r.planned_s or 0.0 for r in run.records) == list(planned)
    assert sorted(r.prompt_id for r in run.records) == ["p0", "p1", "p1", "p2"]  # 1, 3, 5, 7 mod 3
    assert [r.error for r in run.records] == [None] * 4
    for record in run.records:
        assert record.planned_s is not None
        assert record.started_s >= record.planned_s  # never early; late by what the machine made it
    assert run.cpu_pct is not None
    assert len([s for s in server.seen if s.path.endswith("/chat/completions")]) == 4


async def test_a_closed_loop_member_keeps_its_slots_busy_from_the_instant_for_the_duration() -> None:
    """Both slots in flight at once, and the loop ends no sooner than the instant plus its duration.
    How many requests fit is the machine's (a starved run began its slots 0.47 s into 0.5 s and sent
    two): the count, each slot sending again as its answer ends, is pinned on trio's virtual clock
    (test_fleet_clock.py)."""
    deal = FleetDeal(size=2, member=0, seed=1, start_at=time.time() + 0.2, slots=2)
    spec = _spec(deal, concurrency=2, duration_s=0.5)
    with serve_sse(_script) as server:
        run = await drive_endpoint(spec, server.url, 20.0, EndpointOptions(rtt_samples=1))
    assert time.time() >= deal.start_at + 0.5  # the duration whole, however late the slots began
    first, second = sorted(run.records, key=lambda r: r.started_s)[:2]
    assert second.started_s < first.started_s + first.e2e_ms / 1000  # both slots busy at once
    assert [r.error for r in run.records] == [None] * len(run.records)
    assert all(r.planned_s is None for r in run.records)
    assert len([s for s in server.seen if s.path.endswith("/chat/completions")]) == len(run.records)
