"""Issue 50: a gray-box closed loop's count, held by its replicas' paces.

A gray-box server is the worker's own, so the submitter takes no floor or count of it; the slot bound
divides by the records' own shortest E2E. The attack: a worker adds as many records of half a microsecond
as it has real ones, at the instant its last real one started. None is in flight as long as the overlap
tolerance, so its two slots hold them; physics passes them (its own round trip is under 2 ms); its median
is still one of its real records. Judged on the median alone it agreed with an honest replica and its count
doubled. Its pace (slots x the task's duration over its records) is half the honest one's: it is apart, and
says so; honest replicas whose counts differ by the duration's cut, or by a slow request, agree.
"""

from __future__ import annotations

import json

from kit.loads import load_measurement

from protocol import ComputeUnit, Endpoint, GenerateSpec, Measurement, Prompt, RequestRecord, TaskSpec, derive
from protocol.genstats import summarize_generation
from protocol.units import RUNTIME_OF
from scheduler import Refusal, check_figures, check_sends
from scheduler.language.campaign import parse_campaign
from scheduler.language.needs import Needs, campaign_needs
from scheduler.verification.agreement import (
    PRIOR,
    Outcome,
    Pace,
    Replica,
    agree,
    band,
    pace_of,
    replica_of,
    settle,
)
from scheduler.verification.references import judge

SLOTS, DURATION_S, E2E_MS = 2, 4.0, 60.0
GRAY = GenerateSpec(
    prompts=(Prompt(id="a", text="one"),),
    prompts_sha256="0" * 64,
    endpoint=Endpoint(model="m"),  # the worker's own server: gray-box
    concurrency=SLOTS,
    duration_s=DURATION_S,
)
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=GRAY, timeout_s=60.0)
SPREAD = PRIOR / 3**0.5  # a fresh class's, as `settle` assumes


def _record(started: float, e2e: float = E2E_MS, ttft: float = 50.5) -> RequestRecord:
    return RequestRecord(
        prompt_id="a", prompt_tokens=3, output_tokens=2, ttft_ms=ttft, e2e_ms=e2e,
        token_times_ms=(ttft, e2e), started_s=started,
    )  # fmt: skip


def _honest(e2e: float = E2E_MS, slow: int = 0) -> list[RequestRecord]:
    """Each slot's requests one after another (1 ms between) until the duration; `slow`: that many of
    the first slot's first requests took ten times as long."""
    out = []
    for slot in range(SLOTS):
        at, k = 0.0, 0
        while at < DURATION_S:
            took = 10 * e2e if slot == 0 and k < slow else e2e
            out.append(_record(at, took))
            at, k = at + took / 1e3 + 0.001, k + 1
    return out


def _padded(records: list[RequestRecord]) -> list[RequestRecord]:
    """The attack: as many records of 0.5 us as real ones, less one, where its last real one started."""
    at = max(r.started_s for r in records)
    return [*records, *(_record(at, e2e=0.0005, ttft=0.0004) for _ in range(len(records) - 1))]


def _accepted(records: list[RequestRecord]) -> Measurement:
    """The result as the submitter accepts it: derived again and its sends checked (a gray-box loop has
    no floor taken of its server)."""
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    measured = load_measurement(summarize_generation(records, wall, GRAY).with_(rtt_ms=0.3))
    figures = check_figures(derive(measured, SPEC), SPEC)
    assert not isinstance(figures, Refusal), figures
    sent = check_sends(figures, SPEC, SPEC, None)
    assert not isinstance(sent, Refusal), sent  # every check before replication passes it
    return sent


def test_a_padded_loop_keeps_its_median_and_doubles_its_count_but_not_its_pace() -> None:
    honest, liar = _accepted(_honest()), _accepted(_padded(_honest()))
    assert liar.generation is not None
    assert honest.generation is not None
    assert len(liar.generation.records) == 2 * len(honest.generation.records) - 1
    a, b = replica_of("honest", honest, SPEC), replica_of("liar", liar, SPEC)
    assert a.median_ms == b.median_ms == E2E_MS  # the figure the median compares: the same
    assert agree(
        Replica("honest", a.median_ms, a.spread), Replica("liar", b.median_ms, b.spread), SPREAD
    )  # before
    assert a.pace_ms is not None
    assert b.pace_ms is not None
    assert a.pace_ms / b.pace_ms > 1.9  # slots x duration over twice the records
    assert not agree(a, b, SPREAD)
    third = replica_of("third", _accepted(_honest(e2e=61.0)), SPEC)
    settled = settle([a, b, third], wanted=2, class_spread=SPREAD)
    assert settled.outcome == Outcome.REPLICATED
    assert settled.agreed == ("honest", "third")
    assert "liar: " in settled.reason
    assert "ms of its slots' time a request against" in settled.reason
    assert "its count, for its figure 60 ms agrees" in settled.reason
    pair = settle([a, b], wanted=2, class_spread=SPREAD)
    assert (
        pair.outcome == Outcome.PENDING
    )  # two apart: a third replica is asked, never a verdict for the liar
    assert "ms of its slots' time a request)" in pair.reason


def test_honest_counts_apart_by_the_cut_or_a_slow_request_agree() -> None:
    quick = replica_of("a", _accepted(_honest(e2e=E2E_MS)), SPEC)
    slower = replica_of("b", _accepted(_honest(e2e=E2E_MS * 1.05)), SPEC)  # 5 % apart, as the medians
    slowed = replica_of("c", _accepted(_honest(slow=2)), SPEC)  # two requests of 600 ms: its mean moves
    assert agree(quick, slower, SPREAD)
    assert agree(quick, slowed, SPREAD)
    assert quick.pace_ms is not None
    assert slowed.pace_ms is not None
    assert slowed.pace_ms > quick.pace_ms


def test_the_cut_is_one_request_a_slot_and_a_long_request_loop_is_judged_with_it() -> None:
    """Each slot's last request starts before the end or does not: two honest loops of 4 s with 1.3 s
    requests record 3 or 4 a slot (4 and 3 are 33 % apart, over the band alone)."""
    four = replica_of("a", _accepted(_honest(e2e=1300.0)), SPEC)  # starts at 0, 1.3, 2.6, 3.9 s
    three = replica_of("b", _accepted(_honest(e2e=1340.0)), SPEC)  # 0, 1.34, 2.68 s: the fourth at 4.02
    assert (four.pace_ms, four.pace_cut) == (1000.0, 0.25)
    assert three.pace_ms is not None
    assert abs(three.pace_ms - 4000 / 3) < 1e-9
    assert (three.pace_ms - four.pace_ms) / four.pace_ms > band(SPREAD)  # the band alone: apart
    assert agree(four, three, SPREAD)  # with one request a slot of cut: together


def test_only_a_lone_timed_closed_loop_has_a_pace() -> None:
    records = _honest()
    measured = _accepted(records)
    assert pace_of(measured, SPEC) == Pace(SLOTS * DURATION_S * 1e3 / len(records), SLOTS / len(records))
    for other in (
        GRAY.with_(duration_s=None),  # a count of requests: no duration to divide
        GRAY.with_(request_rate=5.0),  # an open loop: its count is its schedule's
        GRAY.with_(fleet_size=3),  # a fleet: its members are held to each other
    ):
        assert pace_of(measured, SPEC.with_(generate=other)) is None
    assert pace_of(measured, SPEC.with_(generate=None)) is None
    assert Replica("x", 1.0, 0.0).pace_ms is None  # and replicas without one agree on it


def test_a_gray_box_job_is_replicated_and_a_black_box_url_is_not() -> None:
    """`verify:` left every endpoint job `single`: a gray-box server (each worker's own) is compared
    across peers of one class now; a black-box URL, one server every worker reaches, is held to the
    submitter's own probe and the server's count instead (and `verify:` asking replicas of one is
    refused with the file: tests/unit/scheduler/language/test_endpoints.py)."""
    jobs = [
        {"endpoint": {"model": "m"}, "generate": {"prompts": "builtin:summaries"}},
        {
            "endpoint": {"model": "m", "url": "https://example.org/v1"},
            "generate": {"prompts": "builtin:summaries"},
            "verify": {"replicas": 1},
        },
    ]
    campaign = parse_campaign(json.dumps({"name": "x", "verify": {"replicas": 2}, "jobs": jobs}))
    gray, black = campaign_needs(campaign, {})
    assert (gray.replicable, black.replicable) == (True, False)
    model = Needs(
        job_index=2, unit=ComputeUnit.CPU_ONNX, runtime=RUNTIME_OF[ComputeUnit.CPU_ONNX], min_ram_mb=256,
        model_sha256="0" * 64, model_size=1, transfer="direct",
    )  # fmt: skip
    assert model.replicable  # a model's job, as ever


def test_a_reference_device_judges_the_pace_too_and_the_reason_names_the_count() -> None:
    reference = replica_of("ref", _accepted(_honest()), SPEC)
    liar = replica_of("liar", _accepted(_padded(_honest())), SPEC)
    settled = judge([reference, liar], wanted=2, class_spread=SPREAD, distrusted={}, references={"ref"})
    assert settled.agreed == ("ref",)  # the reference alone: the liar is out
    assert settled.outliers == (("liar", E2E_MS),)
    assert settled.reason.startswith("liar against the reference ref: ")
    assert "ms of its slots' time a request against" in settled.reason
