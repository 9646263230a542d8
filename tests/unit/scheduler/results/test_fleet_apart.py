"""Issue 50: a fleet member's records held to the other members' where the submitter has no floor of its own.

A member whose quickest first token is under half the lower median of the other members' quickest (each
less its own stated round trip) is kept out of the merged row and named with both figures; a member near
the server is not kept out for the others' distance, a slow liar does not push an honest member out, and
a member needs two others to be judged.
"""

from __future__ import annotations

from protocol import ModelRef, RequestRecord
from protocol.genstats import summarize_generation
from scheduler import TaskView, parse_campaign
from scheduler.results import Member, apart, fleet_rows
from scheduler.state import TaskState

TEXT = (
    "jobs:\n- endpoint: {url: 'http://127.0.0.1:1', model: m}\n"
    "  generate: {prompts: 'builtin:summaries', concurrency: 2, duration_s: 10}\n  fleet: 3\n"
)
JOB = parse_campaign(TEXT).jobs[0]


def _records(n: int, ttft: float) -> list[RequestRecord]:
    return [
        RequestRecord(
            prompt_id="a",
            prompt_tokens=3,
            output_tokens=2,
            ttft_ms=ttft,
            e2e_ms=ttft + 10.0,
            token_times_ms=(ttft, ttft + 10.0),
            started_s=i * (ttft + 11.0) / 1e3,
        )
        for i in range(n)
    ]


def _member(k: int, records: list[RequestRecord], rtt_ms: float = 0.3) -> Member:
    assert JOB.spec.generate is not None
    model = ModelRef(name="m", size=0, sha256="ab" * 32, sources=("endpoint:black-box",))
    task = TaskView(
        task_id=f"c-job-0-{k}", job_index=0, unit="CPU (ONNX)", model=model,
        state=TaskState.DONE, peer_id=f"peer{k}", device_name=f"dev{k}",
    )  # fmt: skip
    stats = summarize_generation(records, 10.0, JOB.spec.generate).with_(rtt_ms=rtt_ms)
    return Member(task, {"JobId": task.task_id, "Status": "Complete"}, stats)


def test_a_member_with_the_issues_zero_length_burst_is_kept_out_of_the_merged_row() -> None:
    liar = [*_records(80, 50.0), *(_records(1, 0.0004) * 4900)]
    members = [_member(0, _records(80, 50.0)), _member(1, _records(84, 51.0)), _member(2, liar)]
    _, [merged] = fleet_rows([JOB], {0: members}, "2026-01-01T00:00:00Z")
    assert merged["Status"] == "Complete"
    assert merged["Requests"] == "164"  # the two honest members' only
    assert merged["WorkerPeerId"] == "peer0;peer1"
    assert merged["FleetLost"] == (
        "dev2 (peer2): kept out: its quickest first token 0.0004 ms is under 0.5 x 49.7 ms, the lower "
        "median of the 2 other members' quickest less their round trips"
    )
    assert "merged from the raw records of 2 of 3 members" in merged["Detail"]
    assert float(merged["TtftMsMedian"]) >= 50.0


def test_a_member_near_the_server_is_not_kept_out_for_the_others_distance() -> None:
    near = _member(0, _records(50, 20.0), rtt_ms=0.1)
    far = [_member(1, _records(20, 120.0), rtt_ms=100.0), _member(2, _records(20, 121.0), rtt_ms=100.0)]
    assert apart([near, *far]) == {}


def test_a_slow_liar_does_not_push_an_honest_member_out() -> None:
    members = [
        _member(0, _records(50, 50.0)),
        _member(1, _records(50, 52.0)),
        _member(2, _records(5, 9000.0)),
    ]
    assert apart(members) == {}


def test_a_member_needs_two_others_to_be_judged() -> None:
    assert apart([_member(0, _records(50, 50.0)), _member(1, _records(5, 0.0004))]) == {}
