"""Multi-turn sessions against a loopback server that logs every request (issue 51).

The server (`kit.sse_server`, real sockets, one thread a connection) answers each request with a text
made from that request (its turn and a counter), so the answers a session carries can only be the
ones this server gave. Asserted from the server's own log: turn k's request holds the conversation's
turns 1..k-1, each followed by the server's earlier answer, then turn k; none of the dataset's own
answers is ever sent; a session's next turn waits for the answer and the think time; concurrency
counts sessions (at most that many conversations in flight); an open loop's planned sends are the
sessions' arrivals, checked by the submitter's own send check, and two fleet members dealt one schedule
send theirs from one instant and merge as distinct sessions. Hostile answers stay bounded: an empty
answer is carried as it was, a huge one cut to the prompt limit, a broken stream ends its session
there, and nothing past the run's memory budget is kept.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Final

import trio
from kit.sse_server import DONE_EVENT, Reply, chunk_event, scheduled, serve_sse

from drivers.endpoint.load import EndpointOptions, EndpointRun, drive_endpoint, run_endpoint
from protocol import Endpoint, GenerateSpec, Prompt, RequestRecord
from protocol.arrivals import open_loop
from protocol.generation import MAX_PROMPT_CHARS, MAX_RECORDS
from protocol.genstats import summarize_generation
from scheduler.results.fleetrows import fleet_records
from scheduler.state.fleet import deal
from scheduler.verification.sendcheck import (
    deal_problems,
    in_flight_problems,
    open_loop_problems,
    session_problems,
)

THINK_S = 0.05
CONVERSATIONS = tuple(
    Prompt(id=f"c{i}", text=f"c{i} q1", follow_ups=(f"c{i} q2", f"c{i} q3"), reference="dataset answer")
    for i in range(4)
)


class Logged:
    """The server's script: each answer names its turn and a serial number no client can guess."""

    def __init__(self) -> None:
        self.serial = itertools.count(1)
        self.lock = threading.Lock()
        self.answered: dict[int, str] = {}  # serial -> answer text, in the server's own log

    def __call__(self, body: dict[str, object], attempt: int) -> Reply:
        messages = body["messages"]
        assert isinstance(messages, list)
        turn = sum(1 for m in messages if m["role"] == "user")
        with self.lock:
            n = next(self.serial)
            text = f"answer {n} to turn {turn}"
            self.answered[n] = text
        return scheduled([text[:9], text[9:]], first_s=0.005 * turn, every_s=0.002, usage=(12 * turn, 2))


def _spec(**fields: object) -> GenerateSpec:
    values: dict[str, object] = {
        "prompts": CONVERSATIONS,
        "prompts_sha256": "0" * 64,
        "endpoint": Endpoint(model="m"),
        "think_time_s": THINK_S,
    }
    return GenerateSpec.model_validate(values | fields)


def _messages(seen: object) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in seen.body["messages"]]  # type: ignore[attr-defined]


def _check_log(server_seen: list[object], answered: set[str]) -> dict[str, int]:
    """Every logged request a conversation's prefix: its questions in order, each earlier one followed by
    an answer this server gave; returns the turns seen per conversation."""
    deepest: dict[str, int] = {}
    for seen in server_seen:
        if not seen.path.endswith("/chat/completions"):  # type: ignore[attr-defined]
            continue
        said = _messages(seen)
        conversation = said[0][1].split()[0]
        prompt = next(p for p in CONVERSATIONS if p.id == conversation)
        questions = (prompt.text, *prompt.follow_ups)
        k = (len(said) + 1) // 2
        assert [c for r, c in said if r == "user"] == list(questions[:k]), said
        assert [r for r, _ in said] == ["user", "assistant"] * (k - 1) + ["user"], said
        assert all(c in answered for r, c in said if r == "assistant"), said  # the server's own answers
        assert "dataset answer" not in str(said)
        deepest[conversation] = max(deepest.get(conversation, 0), k)
    return deepest


def _sessions(records: tuple[RequestRecord, ...]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = {}
    for r in records:
        assert r.session is not None
        assert r.turn is not None
        out.setdefault(r.session, []).append(r)
    return {s: sorted(rs, key=lambda r: r.turn or 0) for s, rs in out.items()}


def test_a_closed_loop_replays_each_conversation_turn_by_turn_counting_sessions() -> None:
    script = Logged()
    spec = _spec(concurrency=2)
    with serve_sse(script) as server:
        run = run_endpoint(spec, server.url, deadline_s=60.0, options=EndpointOptions(rtt_samples=1))
    answered = set(script.answered.values())
    assert _check_log(server.seen, answered) == {p.id: 3 for p in CONVERSATIONS}
    assert len(run.records) == 12
    assert all(r.error is None for r in run.records)
    for turns in _sessions(run.records).values():
        assert [r.turn for r in turns] == [1, 2, 3]
        for before, after in itertools.pairwise(turns):  # the answer, then the think time, then the turn
            assert after.started_s >= before.started_s + before.e2e_ms / 1e3 + THINK_S
            assert after.prompt_tokens > before.prompt_tokens
    assert next(in_flight_problems(run.records, 2), None) is None  # two sessions at once, never more
    assert next(session_problems(run.records, spec), None) is None
    stats = summarize_generation(run.records, run.wall_s, spec)
    assert [(t.turn, t.requests) for t in stats.by_turn] == [(1, 4), (2, 4), (3, 4)]
    assert stats.sessions is not None
    assert (stats.sessions.sessions, stats.sessions.completed, stats.sessions.turns_mean) == (4, 4, 3.0)
    assert stats.sessions.duration_s.min >= 2 * THINK_S


def test_an_open_loop_sends_session_arrivals_on_its_schedule_and_passes_the_send_check() -> None:
    script = Logged()
    seed = 5
    spec = _spec(request_rate=20.0, arrival_seed=seed)
    with serve_sse(script) as server:
        run = trio.run(drive_endpoint, spec, server.url, 60.0, EndpointOptions(rtt_samples=1))
    _check_log(server.seen, set(script.answered.values()))
    firsts = [r for r in run.records if r.turn == 1]
    assert sorted(r.planned_s or 0.0 for r in firsts) == list(open_loop(20.0, seed, None, 4, MAX_RECORDS))
    assert all(r.planned_s is None for r in run.records if r.turn != 1)  # later turns follow the answers
    assert len(run.records) == 12
    assert next(open_loop_problems(firsts, run.unsent, spec, seed), None) is None
    assert next(session_problems(run.records, spec), None) is None


HUGE_TOKENS: Final = 512
"""The hostile labs' `max_new_tokens`: c1's 100,000 characters are an answer such a request may get
(512 x 256 characters), so the prompt limit and the run's budget are what cut them, not the answer's
bound (at the default 64 tokens, 16,384 characters, it ends the first turn `response_too_large`)."""


def _hostile(body: dict[str, object], attempt: int) -> Reply:
    """c0: an empty first answer; c1: a huge one (100,000 characters in 1,000-character deltas, what
    `HUGE_TOKENS` may carry: `drivers.endpoint.attempt.MAX_TOKEN_CHARS`); c2: turn 2 breaks off
    mid-stream; c3: an honest one."""
    messages = body["messages"]
    assert isinstance(messages, list)
    conversation, turn = str(messages[0]["content"]).split()[0], sum(m["role"] == "user" for m in messages)
    if conversation == "c0" and turn == 1:
        return Reply(pieces=((0.0, chunk_event("")), (0.0, DONE_EVENT)))
    if conversation == "c1" and turn == 1:
        huge = tuple((0.0, chunk_event("h" * 1000)) for _ in range(100))
        return Reply(pieces=(*huge, (0.0, DONE_EVENT)))
    if conversation == "c2" and turn == 2:
        return Reply(pieces=((0.0, chunk_event("cut")), (0.0, b'data: {"choices": [')))
    return scheduled(["fine"], usage=(5, 1))


def test_hostile_answers_stay_bounded_and_a_broken_turn_ends_its_session() -> None:
    spec = _spec(concurrency=4, max_new_tokens=HUGE_TOKENS)
    with serve_sse(_hostile) as server:
        run = run_endpoint(spec, server.url, deadline_s=60.0, options=EndpointOptions(rtt_samples=1))
    carried: dict[str, list[str]] = {}
    for seen in server.seen:
        if seen.path.endswith("/chat/completions"):
            said = _messages(seen)
            if len(said) == 3:
                carried[said[0][1].split()[0]] = [c for r, c in said if r == "assistant"]
    assert carried["c0"] == [""]  # the empty answer, as it was
    assert carried["c1"] == ["h" * MAX_PROMPT_CHARS]  # 100,000 characters answered, the prompt limit carried
    assert "c2" in carried
    assert carried["c3"] == ["fine"]
    by_prompt: dict[str, list[RequestRecord]] = {}
    for r in run.records:
        by_prompt.setdefault(r.prompt_id, []).append(r)
    broken = sorted(by_prompt["c2"], key=lambda r: r.turn or 0)
    assert [(r.turn, r.error) for r in broken] == [(1, None), (2, "stream_error")]  # no turn 3
    stats = summarize_generation(run.records, run.wall_s, spec)
    assert stats.sessions is not None
    assert (stats.sessions.sessions, stats.sessions.completed) == (4, 3)
    assert stats.by_turn[1].errors == 1


def test_a_session_past_the_runs_memory_budget_ends_as_response_too_large() -> None:
    small = EndpointOptions(rtt_samples=1, budget=(40_000, 1 << 20, 1 << 25, 1 << 23))
    with serve_sse(_hostile) as server:
        spec = _spec(concurrency=1, max_new_tokens=HUGE_TOKENS)
        run = run_endpoint(spec, server.url, deadline_s=60.0, options=small)
    huge = [r for r in run.records if r.prompt_id == "c1"]
    assert [(r.turn, r.error) for r in huge] == [(1, "response_too_large")]  # and its session ended
    assert [r.turn for r in run.records if r.prompt_id == "c3"] == [1, 2, 3]


async def test_fleet_members_send_session_arrivals_on_one_clock_and_merge_as_distinct_sessions() -> None:
    """Two members dealt one seeded schedule of session arrivals (the submitter's `deal`), started at one
    instant: each member's first turns are its deal's planned sends (the send check passes), later
    turns follow the answers, and the fleet's merged figures count every member's sessions apart."""
    script = Logged()
    spec = _spec(request_rate=8.0, duration_s=1.0, fleet_size=2, fleet_seed=3)
    start_at = time.time() + 0.3  # the submitter's instant; here both members share this clock
    dealt = [deal(spec, 2, k, seed=3, start_at=start_at) for k in (0, 1)]
    deals = [d.with_(offset_s=0.0, offset_bound_s=0.001) for d in dealt]
    members = [spec.with_(deal=d) for d in deals]
    runs: list[EndpointRun] = []
    with serve_sse(script) as server:

        async def member(s: GenerateSpec) -> None:
            runs.append(await drive_endpoint(s, server.url, 30.0, EndpointOptions(rtt_samples=1)))

        async with trio.open_nursery() as nursery:
            for s in members:
                nursery.start_soon(member, s)
    _check_log(server.seen, set(script.answered.values()))
    sessions = 0
    for run in runs:
        firsts = [r for r in run.records if r.turn == 1]
        s = next(m for m in members if m.deal is not None and firsts[0].planned_s in m.deal.planned_s)
        assert s.deal is not None
        assert next(deal_problems(firsts, run.unsent, s.deal, s, run.records), None) is None
        assert next(session_problems(run.records, s), None) is None
        sessions += len(firsts)
    assert sessions == sum(len(d.planned_s) for d in deals) > 2
    each = [summarize_generation(r.records, r.wall_s, spec) for r in runs]
    merged = summarize_generation(fleet_records(each), 1.0, spec)
    assert merged.sessions is not None
    assert merged.sessions.sessions == sessions  # each member's session 0 is its own
