"""A load's records against the schedule the submitter gave it (a fleet member's signed deal, a lone
open loop's seed): each way to depart from it is refused with the field, the worker's value and the
bound; an honest client's records pass unchanged, late ones too."""

from __future__ import annotations

import pytest
from kit.loads import load_measurement

from protocol import (
    CapacityLevel,
    CapacityResult,
    CapacitySpec,
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    TaskSpec,
    derive,
)
from protocol.arrivals import open_loop
from protocol.generation import MAX_RECORDS
from protocol.genstats import summarize_generation
from scheduler import Refusal, check_figures, check_sends, deal
from scheduler.verification import LATE_SLACK_S

GENERATE = GenerateSpec(
    prompts=(Prompt(id="a", text="one"), Prompt(id="b", text="two")),
    prompts_sha256="0" * 64,
    endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
    request_rate=20.0,
    duration_s=4.0,
    fleet_size=2,
)
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=GENERATE, timeout_s=60.0)
BOUND = 0.002
DEAL = deal(GENERATE, 2, 1, seed=7, start_at=1.7e9).with_(offset_s=0.01, offset_bound_s=BOUND)
SIGNED = SPEC.with_(generate=GENERATE.with_(deal=DEAL))


def _record(planned: float, lag: float = 0.003) -> RequestRecord:
    return RequestRecord(
        prompt_id="a", prompt_tokens=3, output_tokens=2, ttft_ms=20.0, e2e_ms=30.0,
        token_times_ms=(20.0, 30.0), started_s=planned + lag, planned_s=planned,
    )  # fmt: skip


def _measurement(
    records: list[RequestRecord], generate: GenerateSpec = GENERATE, unsent: int = 0
) -> Measurement:
    """A load's measurement as the worker builds it: raw records, every figure derived from them."""
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    measured = load_measurement(summarize_generation(records, wall, generate, unsent=unsent))
    return derive(measured, SPEC.with_(generate=generate))


def _checked(records: list[RequestRecord], unsent: int = 0) -> Measurement | Refusal:
    figures = check_figures(
        _measurement(records, unsent=unsent), SPEC
    )  # self-consistent: the figures check passes
    assert not isinstance(figures, Refusal), figures
    return check_sends(figures, SPEC, SIGNED)


def _refused(records: list[RequestRecord], unsent: int = 0) -> str:
    refusal = _checked(records, unsent)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    return refusal.detail


def _dealt(k: int, lag: float = 0.003) -> RequestRecord:
    """The member's k-th dealt send as an honest member records it (its prompt: the deal's, cycled)."""
    return _record(DEAL.planned_s[k], lag).with_(prompt_id=GENERATE.prompts[DEAL.prompts[k] % 2].id)


HONEST = [_dealt(k) for k in range(len(DEAL.planned_s))]


def test_an_honest_member_passes_unchanged_and_a_late_one_within_the_slack_too() -> None:
    assert len(HONEST) > 30  # 20 req/s for 4 s, every other arrival
    m = _measurement(HONEST)
    assert _checked(HONEST) == m
    left = len(HONEST) - 5
    behind = [_dealt(k, lag=BOUND + LATE_SLACK_S - 0.01) for k in range(5)]
    behind_m = check_figures(_measurement(behind, unsent=left), SPEC)
    assert not isinstance(check_sends(behind_m, SPEC, SIGNED), Refusal)  # late within the slack: shown
    early = [_dealt(k, lag=-BOUND + 1e-4) for k in range(5)]
    early_m = check_figures(_measurement(early, unsent=left), SPEC)
    assert not isinstance(check_sends(early_m, SPEC, SIGNED), Refusal)  # early within the clock bound


def test_more_records_than_dealt_are_refused_with_both_counts() -> None:
    made_up = HONEST + [
        _dealt(len(HONEST) - 1).with_(planned_s=DEAL.planned_s[-1] + 0.001 * i) for i in range(1, 2000)
    ]
    detail = _refused(made_up)
    assert detail == (
        f"generation.records: {len(made_up)} records, more than the {len(HONEST)} sends of the deal"
    )


def test_a_planned_time_the_deal_does_not_have_is_refused() -> None:
    other = deal(GENERATE, 2, 0, seed=7, start_at=1.7e9).planned_s[3]  # member 0's, not this one's
    detail = _refused([*HONEST[:5], _dealt(5).with_(planned_s=other, started_s=other + 0.003)])
    assert detail.startswith(f"generation.records[5].planned_s: {other!r}, not a planned send of the deal (")
    assert f"{len(DEAL.planned_s)} planned times" in detail


def test_a_record_without_a_planned_time_is_refused() -> None:
    unplanned = HONEST[0].with_(planned_s=None)
    assert _refused([unplanned]).startswith("generation.records[0].planned_s: None, not a planned send")


def test_a_duplicate_is_refused_naming_the_first() -> None:
    copied = HONEST[: len(HONEST) // 2]
    detail = _refused([*copied, *copied])  # no more records than dealt: only the repeat gives it away
    planned = copied[0].planned_s
    again = "repeats records[0]: each send goes once"
    assert detail == f"generation.records[{len(copied)}].planned_s: {planned!r} s {again}"


def test_two_planned_sends_under_a_nanosecond_apart_are_two_sends() -> None:
    """5,000 sends a second for 0.4 s put two planned times within `PLAN_TOL_S` of each other in about
    one run of a hundred (an honest saturated run was refused "repeats", CI-equivalent at 45a260d):
    each record echoes its own time to the bit and claims that send; a copy is still a repeat."""
    times = list(DEAL.planned_s)
    times[3] = times[2] + 4e-10
    close = DEAL.with_(planned_s=tuple(times))
    signed = SPEC.with_(generate=GENERATE.with_(deal=close))
    honest = [
        _record(t).with_(prompt_id=GENERATE.prompts[close.prompts[k] % 2].id) for k, t in enumerate(times)
    ]
    figures = check_figures(_measurement(honest), SPEC)
    assert not isinstance(figures, Refusal), figures
    assert check_sends(figures, SPEC, signed) == figures
    twice = [*honest[:3], honest[2], *honest[4:]]  # the first of the pair sent twice, its twin never
    figures = check_figures(_measurement(twice), SPEC)
    assert not isinstance(figures, Refusal), figures
    refused = check_sends(figures, SPEC, signed)
    assert isinstance(refused, Refusal)
    assert (
        refused.detail
        == f"generation.records[3].planned_s: {times[2]!r} s repeats records[2]: each send goes once"
    )


@pytest.mark.parametrize(("lag", "words"), [
    (BOUND + LATE_SLACK_S + 0.01, "after its planned"),  # a replay: fired long after its time
    (-BOUND - 0.001, "before its planned"),  # sent before its time, beyond the clock bound
])  # fmt: skip
def test_a_send_outside_its_planned_time_and_bound_is_refused(lag: float, words: str) -> None:
    planned = DEAL.planned_s[4]
    detail = _refused([*HONEST[:4], _dealt(4, lag=lag), *HONEST[5:]])
    assert detail.startswith(f"generation.records[4].started_s: {planned + lag!r} s, {words} {planned!r} s")
    assert f"clock bound {BOUND:.6g} s" in detail


def test_a_member_that_skips_swaps_a_prompt_or_hides_its_backlog_is_refused() -> None:
    """The deal's sends go in order, each with its prompt, and the rest is the member's `unsent`."""
    skipped = _refused([*HONEST[:3], *HONEST[4:]], unsent=1)
    assert skipped.startswith(f"generation.records: no record of the send planned at {DEAL.planned_s[3]!r} s")
    swapped = [*HONEST[:2], HONEST[2].with_(prompt_id="a"), *HONEST[3:]]
    assert _refused(swapped).startswith("generation.records[2].prompt_id: 'a', the send planned at ")
    left = len(HONEST) - 10
    assert _refused(HONEST[:10], unsent=0) == (
        f"generation.unsent: the worker says 0, the deal leaves {left} of {len(HONEST)} unsent"
    )


def test_a_closed_loop_member_is_bounded_by_the_run() -> None:
    closed = GENERATE.with_(request_rate=None, concurrency=2)
    spec = SPEC.with_(generate=closed)
    signed = spec.with_(generate=closed.with_(deal=deal(closed, 2, 0, seed=7, start_at=1.7e9)))
    ok = [_record(0.5).with_(planned_s=None), _record(3.9).with_(planned_s=None)]
    m = _measurement(ok)
    assert check_sends(m, spec, signed) == m
    late = _measurement([*ok, _record(4.0 + LATE_SLACK_S + 0.5).with_(planned_s=None)])
    refusal = check_sends(late, spec, signed)
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith("generation.records[2].started_s: ")
    planned = check_sends(_measurement([_record(0.5)]), spec, signed)
    assert isinstance(planned, Refusal)
    assert "dealt slots, no planned sends" in planned.detail


def test_a_member_without_a_known_deal_cannot_be_checked_and_says_so() -> None:
    refusal = check_sends(_measurement(HONEST), SPEC, None)  # a lease reclaimed after a restart
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INTERNAL
    assert "deal is not known" in refusal.detail


def _slot_records(slots: int, count: int, e2e_ms: float = 30.0) -> list[RequestRecord]:
    """A closed loop's records as its slots send them: each slot's next request right after its last."""
    return [
        _record(0.0, lag=(k // slots) * e2e_ms / 1e3).with_(planned_s=None, prompt_id="a", e2e_ms=e2e_ms)
        for k in range(count)
    ]


def test_a_closed_loop_keeps_at_most_its_slots_in_flight() -> None:
    """Back to back in each slot passes (an end and the next start at one instant included); a record
    that overlaps one slot too many was never sent by a loop of that many."""
    closed = GENERATE.with_(fleet_size=None, request_rate=None, concurrency=2, duration_s=None)
    spec = SPEC.with_(generate=closed)
    honest = _slot_records(2, 40)
    m = _measurement(honest, closed)
    assert check_sends(m, spec, None) == m  # no schedule to keep: nothing signed is needed
    crowded = _measurement([*honest, honest[7].with_(started_s=honest[7].started_s + 0.01)], closed)
    refusal = check_sends(crowded, spec, None)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert refusal.detail.startswith("generation.records: 3 requests in flight at ")
    assert refusal.detail.endswith("more than the 2 slots of its closed loop")


def test_each_level_of_a_concurrency_search_keeps_its_slots() -> None:
    capacity = CapacitySpec(max_concurrency=4, level_s=2.0)
    searched = GENERATE.with_(fleet_size=None, request_rate=None, duration_s=None, capacity=capacity)
    spec = SPEC.with_(generate=searched)

    def level(n: int, records: list[RequestRecord]) -> CapacityLevel:
        wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
        return CapacityLevel(level=n, generation=summarize_generation(records, wall, searched), passed=True)

    def searched_with(levels: list[CapacityLevel]) -> Measurement:
        result = CapacityResult(by="concurrency", goodput_pct=90.0, levels=tuple(levels), knee=4.0,
                                first_fail=None, finished=True)  # fmt: skip
        return _measurement(_slot_records(1, 4)).with_(capacity=result)

    honest = searched_with([level(1, _slot_records(1, 10)), level(2, _slot_records(2, 10))])
    assert check_sends(honest, spec, None) == honest
    crowded = searched_with([level(1, _slot_records(1, 10)), level(2, _slot_records(3, 12))])
    refusal = check_sends(crowded, spec, None)
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith("capacity.levels[1].generation.records: 3 requests in flight at ")


def test_a_closed_loop_member_keeps_its_dealt_slots() -> None:
    closed = GENERATE.with_(request_rate=None, concurrency=2, duration_s=4.0)
    spec = SPEC.with_(generate=closed)
    signed = spec.with_(generate=closed.with_(deal=deal(closed, 2, 0, seed=7, start_at=1.7e9)))
    assert signed.generate is not None
    assert signed.generate.deal is not None
    assert signed.generate.deal.slots == 2
    many = _slot_records(3, 30)  # three at once, from a deal of two slots
    refusal = check_sends(_measurement(many, closed), spec, signed)
    assert isinstance(refusal, Refusal)
    assert "3 requests in flight" in refusal.detail


# A lone worker's open loop: the submitter drew the seed of its planned sends (`arrival_seed`).
LONE = GENERATE.with_(fleet_size=None)
LONE_SPEC = SPEC.with_(generate=LONE)
SEED = 2**62 + 3
LONE_SIGNED = LONE_SPEC.with_(generate=LONE.with_(arrival_seed=SEED))
PLAN = open_loop(20.0, SEED, 4.0, 2, MAX_RECORDS)


def _sent(slot: int, lag: float = 0.002) -> RequestRecord:
    """The send planned in `slot`, as an honest loop records it (its prompt: the slot's, cycled)."""
    return _record(PLAN[slot], lag).with_(prompt_id=LONE.prompts[slot % 2].id)


def _lone(records: list[RequestRecord], unsent: int = 0) -> Measurement | Refusal:
    figures = check_figures(_measurement(records, LONE, unsent), LONE_SPEC)
    assert not isinstance(figures, Refusal), figures
    return check_sends(figures, LONE_SPEC, LONE_SIGNED)


def _lone_refused(records: list[RequestRecord], unsent: int = 0) -> str:
    refusal = _lone(records, unsent)
    assert isinstance(refusal, Refusal), "accepted"
    assert refusal.reason == FailureReason.INVALID
    return refusal.detail


def test_an_honest_open_loop_passes_whole_late_or_cut_by_its_deadline() -> None:
    assert len(PLAN) > 50
    every = [_sent(k) for k in range(len(PLAN))]
    assert not isinstance(_lone(every), Refusal)
    behind = [_sent(k, lag=3.0 + k * 0.05) for k in range(len(PLAN))]  # seconds late: saturated, shown
    assert not isinstance(_lone(behind), Refusal)
    cut = every[:30]
    assert not isinstance(_lone(cut, unsent=len(PLAN) - 30), Refusal)


def test_an_open_loop_that_plans_its_own_schedule_is_refused() -> None:
    """A client that fell behind and rewrote each planned time to when it really sent (no lag, a
    slower schedule) is refused by the first planned time the submitter's seed does not have."""
    own = [_sent(k).with_(planned_s=0.1 * k + 0.05, started_s=0.1 * k + 0.05) for k in range(20)]
    detail = _lone_refused(own)
    assert detail.startswith("generation.records[0].planned_s: 0.05, not a planned send of the schedule (")
    assert f"{len(PLAN)} planned times" in detail


def test_an_open_loop_that_hides_its_backlog_is_refused() -> None:
    detail = _lone_refused([_sent(k) for k in range(30)], unsent=0)
    left = len(PLAN) - 30
    assert detail == f"generation.unsent: the worker says 0, the schedule leaves {left} of {len(PLAN)} unsent"


def test_an_open_loop_that_skips_a_send_is_refused() -> None:
    kept = [_sent(k) for k in range(len(PLAN)) if k != 7]
    detail = _lone_refused(kept, unsent=1)
    assert detail.startswith(f"generation.records: no record of the send planned at {PLAN[7]!r} s")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"prompt_id": "b"}, "generation.records[4].prompt_id: 'b', the send planned at"),
        ({"started_s": PLAN[4] - 0.01}, "generation.records[4].started_s: "),
        ({"planned_s": PLAN[3]}, "generation.records[4].planned_s: "),  # a repeat of the send before
    ],
)
def test_an_open_loop_record_off_its_planned_send_is_refused(change: dict[str, object], words: str) -> None:
    records = [_sent(k) for k in range(len(PLAN))]
    records[4] = records[4].with_(**change)
    if "planned_s" in change:
        records[4] = records[4].with_(started_s=PLAN[3] + 0.002)
    assert _lone_refused(records).startswith(words)


def test_an_open_loop_with_more_records_than_planned_is_refused() -> None:
    more = [_sent(k) for k in range(len(PLAN))] + [_sent(0)]
    assert _lone_refused(more) == (
        f"generation.records: {len(PLAN) + 1} records, more than the {len(PLAN)} sends of the schedule"
    )


def test_an_open_loop_whose_seed_is_not_known_cannot_be_checked() -> None:
    m = _measurement([_sent(0)], LONE)
    for signed in (None, LONE_SPEC):  # no offer kept, or one without a seed
        refusal = check_sends(m, LONE_SPEC, signed)
        assert isinstance(refusal, Refusal)
        assert refusal.reason == FailureReason.INTERNAL
        assert "open loop's seed is not known" in refusal.detail
