"""A session run's records against its schedule (issue 51): a planned send is a session's arrival, its
first turn held to the plan; each later turn follows its session's previous turn, succeeded, plus the
think time; a session has at most its conversation's turns. What the cheater chooses (when a later
turn starts, which turns exist, how many) is held to what the records themselves and the signed spec
say, never to the worker's own summary."""

from __future__ import annotations

from protocol import (
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    RunConditions,
    TaskSpec,
    derive,
)
from protocol.arrivals import open_loop
from protocol.generation import MAX_RECORDS
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES
from scheduler import Refusal, check_figures, check_sends

THINK_S = 0.1
SEED = 11
SESSIONS = GenerateSpec(
    prompts=(Prompt(id="a", text="one", follow_ups=("two",)), Prompt(id="b", text="three")),
    prompts_sha256="0" * 64,
    endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
    request_rate=5.0,
    duration_s=4.0,
    think_time_s=THINK_S,
)
SPEC = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=SESSIONS, timeout_s=60.0)
SIGNED = SPEC.with_(generate=SESSIONS.with_(arrival_seed=SEED))
PLAN = open_loop(5.0, SEED, 4.0, 2, MAX_RECORDS)


def _records() -> list[RequestRecord]:
    """An honest session run: each planned arrival's first turn, then prompt a's second turn after the
    answer and the think time."""
    out = []
    for k, planned in enumerate(PLAN):
        prompt = SESSIONS.prompts[k % 2]
        first = RequestRecord(
            prompt_id=prompt.id, prompt_tokens=3, output_tokens=2, ttft_ms=20.0, e2e_ms=30.0,
            token_times_ms=(20.0, 30.0), started_s=planned + 0.002, planned_s=planned, session=k, turn=1,
        )  # fmt: skip
        out.append(first)
        if prompt.follow_ups:
            at = first.started_s + 0.030 + THINK_S + 0.001
            out.append(first.with_(started_s=at, planned_s=None, turn=2, prompt_tokens=9))
    return out


def _checked(records: list[RequestRecord], spec: GenerateSpec = SESSIONS) -> Measurement | Refusal:
    wall = max(r.started_s + r.e2e_ms / 1e3 for r in records)
    raw = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=NO_SAMPLES, load_first_ms=0.0, first_inference_ms=0.0,
        warmups_used=0, inference_ms=NO_SAMPLES, peak_load_ram_mb=50.0, peak_inference_ram_mb=60.0,
        cpu_cores_used=1.0, conditions=RunConditions(background_cores=0.05),
        generation=summarize_generation(records, wall, spec),
    )  # fmt: skip
    task = SPEC.with_(generate=spec)
    figures = check_figures(derive(raw, task), task)
    assert not isinstance(figures, Refusal), figures
    return check_sends(figures, task, SIGNED.with_(generate=spec.with_(arrival_seed=SEED)))


def _refused(records: list[RequestRecord], spec: GenerateSpec = SESSIONS) -> str:
    refusal = _checked(records, spec)
    assert isinstance(refusal, Refusal), "accepted"
    assert refusal.reason == FailureReason.INVALID
    return refusal.detail


def test_an_honest_session_run_passes_its_later_turns_outside_the_plan() -> None:
    records = _records()
    assert len(records) > len(PLAN)  # later turns are not planned sends, and are not refused as extra
    checked = _checked(records)
    assert not isinstance(checked, Refusal), checked
    assert checked.generation is not None
    assert checked.generation.sessions is not None
    assert checked.generation.sessions.sessions == len(PLAN)


def test_a_later_turn_sent_before_its_answer_and_think_time_is_refused() -> None:
    records = _records()
    i = next(i for i, r in enumerate(records) if r.turn == 2)
    records[i] = records[i].with_(started_s=records[i - 1].started_s + 0.05)  # before 30 ms + 100 ms think
    assert f"generation.records[{i}].started_s" in _refused(records)
    assert "think" in _refused(records)


def test_turns_the_conversation_does_not_have_or_after_a_failed_turn_are_refused() -> None:
    records = _records()
    b = next(r for r in records if r.prompt_id == "b")
    extra = b.with_(turn=2, planned_s=None, started_s=b.started_s + 1.0)
    assert "past its conversation's last ('b' has 1 turns)" in _refused([*records, extra])
    failed = [r.with_(error="server_error") if r.prompt_id == "a" and r.turn == 1 else r for r in records]
    assert "no successful turn before it in its session" in _refused(failed)
    twice = next(r for r in records if r.turn == 2)
    assert "repeats records" in _refused([*records, twice.with_(started_s=twice.started_s + 0.5)])


def test_a_load_without_sessions_carries_no_turns() -> None:
    plain = SESSIONS.with_(prompts=(Prompt(id="a", text="one"), Prompt(id="b", text="three")))
    records = [r for r in _records() if r.turn == 1]
    assert "but the job asked no sessions" in _refused(records, plain)
    assert not isinstance(_checked([r.with_(session=None, turn=None) for r in records], plain), Refusal)
