"""A session's turns as requests (`Prompt.turn`) and a session run's figures (`protocol.sessions`)."""

from __future__ import annotations

import pytest

from protocol import ChatMessage, Endpoint, GenerateSpec, Prompt, RequestRecord
from protocol.generation import MAX_PROMPT_CHARS
from protocol.genstats import summarize_generation
from protocol.sessions import ttft_by_turn_text

CHAT = Prompt(
    id="c1",
    text="q1",
    messages=(ChatMessage(role="system", content="brief"), ChatMessage(role="user", content="q1")),
    follow_ups=("q2", "q3"),
    reference="dataset answer",
)


def test_turn_k_carries_the_earlier_turns_with_the_answers_given() -> None:
    assert CHAT.turn(1, ()) == CHAT.with_(follow_ups=())
    third = CHAT.turn(3, ("a1", "a2"))
    assert [(m.role, m.content) for m in third.messages] == [
        ("system", "brief"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
        ("user", "q3"),
    ]
    assert (third.id, third.text, third.reference, third.follow_ups) == ("c1", "q3", None, ())
    assert CHAT.turn(2, ("x" * (MAX_PROMPT_CHARS + 9),)).messages[2].content == "x" * MAX_PROMPT_CHARS
    assert CHAT.turn(2, ("",)).messages[2].content == ""  # an empty answer is carried as it was
    with pytest.raises(ValueError, match="turn 4 of 3"):
        CHAT.turn(4, ("a", "b", "c"))


def _record(session: int, turn: int, ttft: float, started: float, error: bool = False) -> RequestRecord:
    return RequestRecord(
        prompt_id="c1",
        prompt_tokens=10 * turn,
        output_tokens=3,
        ttft_ms=ttft,
        e2e_ms=ttft + 20,
        started_s=started,
        session=session,
        turn=turn,
        error="server_error" if error else None,
    )


def test_a_session_runs_figures_come_from_its_records() -> None:
    spec = GenerateSpec(prompts=(CHAT,), prompts_sha256="0" * 64, endpoint=Endpoint(model="m"))
    records = [
        _record(0, 1, 100.0, 0.0),
        _record(0, 2, 40.0, 1.0),
        _record(0, 3, 30.0, 2.0),
        _record(1, 1, 120.0, 0.5),
        _record(1, 2, 50.0, 1.5, error=True),
    ]
    stats = summarize_generation(records, 3.0, spec)
    assert [(t.turn, t.requests, t.errors, t.ttft_ms.median) for t in stats.by_turn] == [
        (1, 2, 0, 110.0),
        (2, 2, 1, 40.0),
        (3, 1, 0, 30.0),
    ]
    assert ttft_by_turn_text(stats.by_turn) == "1:110.0 2:40.0 3:30.0"
    s = stats.sessions
    assert s is not None
    assert (s.sessions, s.completed, s.turns_mean, s.turns_asked_mean) == (2, 1, 2.0, 3.0)
    assert s.duration_s.max == pytest.approx(2.0 + 0.05)  # first send -> the last turn's last token
    assert (s.prompt_tokens_mean, s.output_tokens_mean) == (35.0, 6.0)
    plain = summarize_generation([r.with_(session=None, turn=None) for r in records], 3.0, spec)
    assert (plain.by_turn, plain.sessions) == ((), None)


def test_rouge_scores_a_sessions_first_turn_only_against_its_reference() -> None:
    spec = GenerateSpec(prompts=(CHAT,), prompts_sha256="0" * 64, quality=("rouge",))
    first = _record(0, 1, 100.0, 0.0).with_(output_text="dataset answer")
    later = _record(0, 2, 40.0, 1.0).with_(output_text="something else entirely")
    rouge = summarize_generation([first, later], 2.0, spec).rouge
    assert rouge is not None
    assert (rouge.scored, rouge.rouge_l) == (1, 1.0)
