"""A fleet's start instant on trio's virtual clock: members whose wall clocks disagree send at the
submitter's one instant (`drivers.endpoint.fleetload.start_instant`, `drivers.endpoint.load`, unchanged),
against a scripted server in the same trio run (`kit.clockserver`).

Each member's wall clock is the virtual clock plus its own skew (a context variable: each member is a
task of its own), so the instant a member computes from its deal (`start_at` on the submitter's clock
plus its measured offset) and every send after it land on exact virtual instants, whatever the
machine's load. What is pinned: members with different skews and their measured offsets start at the
same instant, each planned send at instant + planned_s, never early, never late; a member whose deal
carries no offset for its skew starts off by exactly that skew (the offset is what aligns them); a
closed-loop member fills its slots at the instant.
"""

from __future__ import annotations

import contextvars
from types import SimpleNamespace

import pytest
import trio
import trio.testing
from kit.clockserver import ClockServer, serve_on_clock
from kit.sse_server import Reply, prompt_of, scheduled

from drivers.endpoint import fleetload
from drivers.endpoint.load import EndpointOptions, drive_endpoint
from protocol import Endpoint, FleetDeal, GenerateSpec, Prompt

PROMPTS = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(6))
LEAD_S = 10.0  # the instant is this far after the submitter's clock reads WALL0
WALL0 = 1_000.0  # the submitter's wall clock when the test's virtual clock read T0 (small: exact floats)
SKEW: contextvars.ContextVar[float] = contextvars.ContextVar("skew", default=0.0)


@pytest.fixture
async def wall(autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> float:
    """Every member's wall clock runs on the virtual one, ahead of the submitter's by its SKEW (the
    test names `autojump_clock` too: pytest-trio runs on the clock among the test's own arguments)."""
    t0 = trio.current_time()

    def now() -> float:
        return WALL0 + (trio.current_time() - t0) + SKEW.get()

    monkeypatch.setattr(fleetload, "time", SimpleNamespace(time=now))
    return t0


def _script(body: dict[str, object], attempt: int) -> Reply:
    return scheduled(["a", "b"], first_s=0.05, usage=(3, 2))


def _spec(deal: FleetDeal, **fields: object) -> GenerateSpec:
    values: dict[str, object] = {"prompts": PROMPTS, "prompts_sha256": "0" * 64, "duration_s": 2.0}
    values |= {"endpoint": Endpoint(model="tiny"), "fleet_size": deal.size, "deal": deal}
    return GenerateSpec.model_validate(values | fields)


async def _member(server: ClockServer, skew: float, deal: FleetDeal, **fields: object) -> None:
    SKEW.set(skew)  # this task's wall clock
    fields = fields or {"request_rate": 2.0}
    run = await drive_endpoint(_spec(deal, **fields), server.url, 60.0, EndpointOptions(rtt_samples=1))
    assert [r.error for r in run.records] == [None] * len(run.records)


def _heard(server: ClockServer, t0: float) -> dict[str, float]:
    """Each prompt's first request: seconds after the submitter's instant."""
    first: dict[str, float] = {}
    for h in server.heard:
        first.setdefault(prompt_of(h.body), round(h.at - t0 - LEAD_S, 9))
    return first


def _open_deal(
    member: int, offset_s: float, planned: tuple[float, ...], prompts: tuple[int, ...]
) -> FleetDeal:
    return FleetDeal(
        size=2, member=member, seed=7, start_at=WALL0 + LEAD_S, offset_s=offset_s,
        planned_s=planned, prompts=prompts,
    )  # fmt: skip


async def test_members_with_skewed_clocks_send_at_the_submitters_instant_each_at_its_planned_time(
    autojump_clock: trio.testing.MockClock, wall: float
) -> None:
    ahead, behind = 2.5, -4.0  # each member's clock minus the submitter's, as the clock probe measured
    async with serve_on_clock(_script) as server, trio.open_nursery() as members:
        members.start_soon(_member, server, ahead, _open_deal(0, ahead, (0.0, 0.4), (0, 1)))
        members.start_soon(_member, server, behind, _open_deal(1, behind, (0.1, 0.3), (2, 3)))
    assert _heard(server, wall) == {"prompt 0": 0.0, "prompt 2": 0.1, "prompt 3": 0.3, "prompt 1": 0.4}
    assert len(server.heard) == 4


async def test_a_member_whose_deal_omits_its_offset_starts_off_by_its_skew(
    autojump_clock: trio.testing.MockClock, wall: float
) -> None:
    skew = 1.5  # its clock runs 1.5 s ahead, and its deal says 0: it reaches the instant 1.5 s early
    async with serve_on_clock(_script) as server:
        await _member(server, skew, _open_deal(0, 0.0, (0.0, 0.2), (0, 1)))
    assert _heard(server, wall) == {"prompt 0": -skew, "prompt 1": 0.2 - skew}


async def test_a_closed_loop_member_fills_its_slots_at_the_instant_and_stops_at_its_duration(
    autojump_clock: trio.testing.MockClock, wall: float
) -> None:
    deal = FleetDeal(size=2, member=1, seed=7, start_at=WALL0 + LEAD_S, offset_s=-3.0, slots=2)
    async with serve_on_clock(_script) as server:
        await _member(server, -3.0, deal, concurrency=2, duration_s=0.5)
    instants = [round(h.at - wall - LEAD_S, 9) for h in server.heard]
    assert instants[:2] == [0.0, 0.0]  # both slots at the instant
    # each slot sends again as its answer ends (0.05 s later), until the duration: 10 per slot
    assert instants == sorted(instants)
    assert sorted(set(instants)) == [round(0.05 * k, 9) for k in range(10)]
    assert len(instants) == 20
