"""Issue 50: a fleet's records held to the server's floor that the submitter measured itself.

The attack of the issue: a closed-loop fleet member adds 4,900 records of 0.5 us at the instant its last
real one started (they never overlap, each is above zero, and its own round trip is under 2 ms, so physics
passes them), which merged as 5,015 requests at TTFT 0.000 ms. With the floor from the submitter's own
probe of the server, the first such record is refused naming its field, its figure, the floor, how it was
found and the member; an honest member's records pass it; and the slot bound divides by the floor.
"""

from __future__ import annotations

from kit.loads import load_measurement

from protocol import (
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
from protocol.genstats import summarize_generation
from scheduler import Refusal, ServerFloor, check_figures, check_sends, deal, lower_floor, server_floor
from scheduler.verification import FLOOR_SHARE
from scheduler.verification.sendcheck import slots_problems
from scheduler.verification.serverfloor import PROBE_ALLOWANCE_MS

CLOSED = GenerateSpec(
    prompts=(Prompt(id="a", text="one"),),
    prompts_sha256="0" * 64,
    endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
    concurrency=2,
    duration_s=4.0,
    fleet_size=3,
)
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=CLOSED, timeout_s=60.0)
DEAL = deal(CLOSED, 3, 1, seed=7, start_at=1.7e9).with_(offset_s=0.0, offset_bound_s=0.001)
SIGNED = SPEC.with_(generate=CLOSED.with_(deal=DEAL))
PROBED = server_floor([52.0, 50.4, 50.9, 51.3, 50.6], 0.4)  # a server answering its first token in 50 ms


def _record(started: float, ttft: float = 50.5, e2e: float = 60.0) -> RequestRecord:
    return RequestRecord(
        prompt_id="a", prompt_tokens=3, output_tokens=2, ttft_ms=ttft, e2e_ms=e2e,
        token_times_ms=(ttft, e2e), started_s=started,
    )  # fmt: skip


def _honest(n: int = 100) -> list[RequestRecord]:
    """Two slots, each request 60 ms, one after another."""
    return [_record(started=(i // 2) * 0.061) for i in range(n)]


def _attack(records: list[RequestRecord]) -> list[RequestRecord]:
    """The issue's liar: 4,900 records of 0.5 us at the instant its last real one started."""
    at = records[-1].started_s
    return [*records, *(_record(at, ttft=0.0004, e2e=0.0005) for _ in range(4900))]


def _checked(
    records: list[RequestRecord], floor: ServerFloor | None, rtt_ms: float = 0.3
) -> Measurement | Refusal:
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    stats = summarize_generation(records, wall, CLOSED).with_(rtt_ms=rtt_ms)
    measured = load_measurement(stats)
    figures = check_figures(derive(measured, SPEC), SPEC)
    assert not isinstance(figures, Refusal), figures  # self-consistent: only the schedule can refute
    return check_sends(figures, SPEC, SIGNED, floor)


def test_the_floor_is_a_share_of_the_probes_shortest_first_token_less_its_round_trip() -> None:
    assert PROBED is not None
    assert PROBED.floor_ms == FLOOR_SHARE * (50.4 - PROBE_ALLOWANCE_MS - 0.4)
    assert (
        "first token of 50.4 ms less 1 ms for the clients' own work and the 0.4 ms round trip" in PROBED.said
    )
    assert "in 5 requests before the job" in PROBED.said
    assert server_floor([], 0.4) is None  # no probe answered: no floor (physics and the deal only)
    assert server_floor([0.3], 0.4) is None  # nothing left of the server's own time


def test_a_server_answering_in_under_a_millisecond_gets_no_floor() -> None:
    """The suite at load 4 (2026-11-27): a stub on loopback, a probe's shortest 0.22 ms against an
    honest record's 0.087 ms, refused under a floor of 0.088 ms. Under a millisecond a read is mostly
    the clients' own work: the allowance comes off before the share."""
    assert server_floor([0.2236, 0.31, 0.5], 0.0474) is None
    assert server_floor([0.9], 0.0) is None


def test_an_honest_members_records_pass_the_floor() -> None:
    assert not isinstance(_checked(_honest(), PROBED), Refusal)


def test_the_issues_zero_length_burst_passes_physics_alone_and_is_refused_by_the_floor() -> None:
    lying = _attack(_honest())
    assert not isinstance(_checked(lying, None), Refusal)  # the issue's finding: physics reads the liar's rtt
    refusal = _checked(lying, PROBED)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert refusal.detail.startswith(
        "generation.records[100].ttft_ms: 0.0004 ms, under the server's floor of 24.5 ms"
    )
    assert "measured to the server itself" in refusal.detail
    assert refusal.detail.endswith("(fleet member 1 of 3)")


def test_a_record_without_a_first_token_is_held_by_its_e2e() -> None:
    quick = _record(0.5, e2e=1.0).with_(ttft_ms=None, token_times_ms=())
    refusal = _checked([*_honest(), quick], PROBED)
    assert isinstance(refusal, Refusal)
    assert "records[100].e2e_ms: 1.0 ms, under the server's floor" in refusal.detail


def test_failed_records_are_not_held_to_the_floor() -> None:
    failed = _record(0.5, ttft=0.0, e2e=0.0).with_(ttft_ms=None, token_times_ms=(), error="connect")
    assert not isinstance(_checked([*_honest(), failed], PROBED), Refusal)


def test_the_slot_bound_divides_by_the_floor_not_by_the_records_own_shortest() -> None:
    quick = [_record(started=(i // 2) * 0.0011, ttft=0.5, e2e=1.0) for i in range(200)]  # 1 ms each
    assert list(slots_problems(quick, 2, 0.22)) == []  # its own shortest allows 2 x (220 + 1)
    [problem] = slots_problems(quick, 2, 0.22, floor_ms=25.0)
    assert problem == (
        "generation.records: 200 records, more than its 2 slots send in 0.22 s at the server's floor "
        "of 25.0 ms (18)"
    )


def test_a_lone_closed_loop_is_held_to_the_floor_too() -> None:
    lone = CLOSED.with_(fleet_size=None)
    spec = SPEC.with_(generate=lone)
    records = _attack(_honest())
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    measured = load_measurement(summarize_generation(records, wall, lone).with_(rtt_ms=0.3))
    figures = check_figures(derive(measured, spec), spec)
    assert not isinstance(figures, Refusal)
    assert not isinstance(check_sends(figures, spec, spec), Refusal)  # physics alone passes it
    refusal = check_sends(figures, spec, spec, PROBED)
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith("generation.records[100].ttft_ms: 0.0004 ms, under the server's floor")
    assert "fleet member" not in refusal.detail


def test_a_later_probe_only_lowers_the_floor_and_names_both_moments() -> None:
    """The weather (2026-11-27, the suite beside load 13): a probe at a busy moment answered in 106 ms
    at its quickest, an honest member's record a few seconds later in 36 ms. The floor a result is
    judged by is the least of the job's probes: a quieter later probe lowers it, a busier one or one
    that answered nothing leaves it, and one with nothing left of the server's time leaves none."""
    busy = server_floor([106.0, 110.0, 120.0], 0.1)
    assert busy is not None
    assert busy.floor_ms > 36.0  # the honest record went under it
    lowered = lower_floor(busy, [40.0, 38.5, 41.0], 0.1, 2)
    assert lowered is not None
    assert lowered.floor_ms == FLOOR_SHARE * (38.5 - PROBE_ALLOWANCE_MS - 0.1) < 36.0
    assert "in 3 requests at a result's arrival; the least of the job's 2 probes" in lowered.said
    assert f"(the floor before: {busy.floor_ms:.4g} ms)" in lowered.said
    assert (
        lower_floor(busy, [150.0, 140.0], 0.1, 2) is busy
    )  # busier then: the server's quickest is not later
    assert lower_floor(busy, [], None, 2) is busy  # no answer: nothing learned of the server
    assert lower_floor(busy, [0.9], 0.0, 2) is None  # under a millisecond: no floor can be taken
