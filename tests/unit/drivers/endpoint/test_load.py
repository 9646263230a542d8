"""The endpoint client against a scripted loopback server: the happy path and every fault as a kind."""

from __future__ import annotations

import itertools
import json
import math
import socket
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from kit.sse_server import (
    DONE_EVENT,
    Reply,
    SseServer,
    chunk_event,
    prompt_of,
    scheduled,
    serve_sse,
    usage_event,
)
from kit.tlscert import self_signed

from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions, EndpointRun, completions_url, drive_endpoint, run_endpoint
from protocol import (
    ComputeUnit,
    Endpoint,
    GenerateSpec,
    GenerationStats,
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
from scheduler import Refusal, check_sends

KEY = "sk-test-7f3a9c1e55d04b2a8e6f"  # the secret that must appear nowhere but the header
QUICK = RetryPolicy(max_retries=3, max_wait_s=5.0, backoff_s=0.01)


def _spec(*texts: str, **fields: object) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=t) for i, t in enumerate(texts))
    endpoint = Endpoint(model="tiny", api_key=KEY)
    values: dict[str, object] = {"prompts": prompts, "prompts_sha256": "0" * 64, "endpoint": endpoint}
    return GenerateSpec.model_validate(values | fields)


async def _run(
    script: Callable[[dict[str, object], int], Reply],
    spec: GenerateSpec,
    *,
    request_timeout_s: float | None = None,
    deadline_s: float = 20.0,
    max_requests: int | None = None,
) -> tuple[EndpointRun, SseServer]:
    options = EndpointOptions(
        request_timeout_s=request_timeout_s, retry=QUICK, rtt_samples=3, seed=11, max_requests=max_requests
    )
    with serve_sse(script) as server:
        run = await drive_endpoint(spec, server.url, deadline_s, options)
    return run, server


def _endpoint_measurement(stats: GenerationStats) -> Measurement:
    """An endpoint task's measurement as the worker's harness builds it around the run's figures."""
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=NO_SAMPLES, load_first_ms=0.0, first_inference_ms=0.0,
        warmups_used=0, inference_ms=NO_SAMPLES, peak_load_ram_mb=50.0, peak_inference_ram_mb=60.0,
        cpu_cores_used=0.1, conditions=RunConditions(background_cores=0.0), generation=stats,
    )  # fmt: skip


def _only(run: EndpointRun) -> RequestRecord:
    assert len(run.records) == 1
    return run.records[0]


async def test_a_scheduled_stream_is_timed_and_counted_from_usage() -> None:
    texts = ["The", " quick", " brown", " fox", " jumps", " over"]
    script = lambda body, attempt: scheduled(texts, first_s=0.05, every_s=0.01, usage=(7, 6))  # noqa: E731
    run, server = await _run(script, _spec("a", "b", "c", concurrency=2))
    assert [r.error for r in run.records] == [None, None, None]
    assert sorted(r.prompt_id for r in run.records) == ["p0", "p1", "p2"]
    for record in run.records:
        assert record.output_text == "".join(texts)
        assert (record.prompt_tokens, record.output_tokens, record.tokens_counted) == (7, 6, False)
        assert len(record.token_times_ms) == 6
        assert list(record.token_times_ms) == sorted(record.token_times_ms)
        assert record.ttft_ms is not None
        assert record.ttft_ms >= 50
        assert record.ttft_ms == record.token_times_ms[0]
        assert record.e2e_ms == record.token_times_ms[-1]
    assert run.rtt.connect_ms is not None
    assert run.rtt.samples == 3
    assert run.client_overhead_ms is not None
    assert run.read_overhead_ms is not None
    assert run.seed is None
    assert run.retries == 0
    assert run.wall_s > 0
    sent = server.seen[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert (sent.body["temperature"], sent.body["max_tokens"], sent.body["model"]) == (0, 64, "tiny")
    assert "ignore_eos" not in sent.body


async def test_without_usage_tokens_are_counted_per_delta_and_flagged() -> None:
    run, server = await _run(lambda b, a: scheduled(["x", "y", "z"]), _spec("a", chat=False, ignore_eos=True))
    record = _only(run)
    assert (record.output_tokens, record.tokens_counted, record.prompt_tokens) == (3, True, 0)
    assert server.seen[0].path == "/v1/completions"
    assert server.seen[0].body["prompt"] == "a"
    assert server.seen[0].body["ignore_eos"] is True


async def test_bytes_split_mid_line_and_mid_character_and_pings_between() -> None:
    stream = (
        b": ping\n\n" + chunk_event("h\u00e9") + b":\n\n" + chunk_event(" \U0001f642") + usage_event(1, 2)
    )
    stream += DONE_EVENT
    cuts = [0, 3, 14, 22, 23, 40, 41, 60, 61, 62, len(stream)]
    pieces = tuple((0.005, stream[a:b]) for a, b in itertools.pairwise(cuts))
    record = _only((await _run(lambda b, a: Reply(pieces=pieces), _spec("a")))[0])
    assert record.error is None
    assert record.output_text == "h\u00e9 \U0001f642"
    assert (record.output_tokens, len(record.token_times_ms)) == (2, 2)


def _faulty(name: str) -> Reply:
    replies = {
        "error-mid-stream": Reply(
            pieces=((0.0, chunk_event("partial")), (0.0, b'data: {"error": {"message": "CUDA OOM"}}\n\n'))
        ),
        "not-found": Reply(404, (("content-type", "application/json"),), ((0.0, b'{"error": "no"}'),)),
        "json-body": Reply(200, (("content-type", "application/json"),), ((0.0, b'{"choices": []}'),)),
        "html-as-sse": Reply(pieces=((0.0, b"<html>oops</html>\n\n"),)),
        "no-done": Reply(pieces=((0.0, chunk_event("a")),)),
        "redirect": Reply(302, (("location", "http://127.0.0.1:1/"),)),
    }
    return replies[name]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("error-mid-stream", "stream_error"),
        ("not-found", "http_status"),
        ("json-body", "not_sse"),
        ("html-as-sse", "not_sse"),
        ("no-done", "stream_error"),
        ("redirect", "http_status"),
    ],
)
async def test_each_fault_is_a_request_error_of_its_kind(name: str, kind: str) -> None:
    run, server = await _run(lambda body, attempt: _faulty(prompt_of(body)), _spec(name))
    record = _only(run)
    assert record.error == kind, record.error_detail
    assert record.error_detail
    assert len(server.seen) == 1  # nothing here is retried (and no redirect followed)


async def test_a_finish_reason_then_the_end_of_the_body_is_a_complete_answer() -> None:
    # transformers serve (5.x) ends its streams after the finish_reason and usage chunk, with no [DONE]
    finish = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\n'
    reply = Reply(
        pieces=((0.0, chunk_event("a")), (0.0, chunk_event("b")), (0.0, finish + usage_event(3, 2)))
    )
    record = _only((await _run(lambda b, a: reply, _spec("a")))[0])
    assert record.error is None, record.error_detail
    assert (record.output_text, record.output_tokens, record.tokens_counted) == ("ab", 2, False)


async def test_an_error_mid_stream_keeps_what_came_before() -> None:
    record = _only((await _run(lambda b, a: _faulty("error-mid-stream"), _spec("a")))[0])
    assert record.output_text == "partial"
    assert record.ttft_ms is not None
    assert "CUDA OOM" in record.error_detail


@pytest.mark.trio_deadline(60)
async def test_a_stream_that_never_ends_is_cut_at_its_deadline() -> None:
    # The run has no deadline of its own here: only each request's timeout can end these streams (were it
    # not kept, the test's own deadline fails it). The bounds read no load: a trio deadline never fires
    # early, and a busy machine can only make a cut later.
    hang = Reply(pieces=((0.0, chunk_event("a")), (0.0, chunk_event("b"))), hang=True)
    began = time.perf_counter()
    run, _ = await _run(lambda b, a: hang, _spec("a", "b"), request_timeout_s=0.3, deadline_s=math.inf)
    took_ms = (time.perf_counter() - began) * 1e3
    assert [r.error for r in run.records] == ["deadline", "deadline"]
    assert took_ms >= 2 * 300  # one request after the other, each held to its 0.3 s
    # the timeout runs from the request's start (taking a connection included), e2e from its first byte
    # written: both lie within the run
    assert sum(r.e2e_ms for r in run.records) <= took_ms
    for record in run.records:
        assert (record.output_text, record.output_tokens, record.tokens_counted) == ("ab", 2, True)


async def test_a_slow_first_byte_is_waited_for_and_shows_in_ttft() -> None:
    record = _only((await _run(lambda b, a: scheduled(["a", "b"], first_s=0.3), _spec("a")))[0])
    assert record.error is None
    assert record.ttft_ms is not None
    assert record.ttft_ms >= 300


def _limited(
    status: int, retry_after: str, ok_after: int | None
) -> Callable[[dict[str, object], int], Reply]:
    def script(body: dict[str, object], attempt: int) -> Reply:
        if ok_after is not None and attempt >= ok_after:
            return scheduled(["ok"], usage=(1, 1))
        return Reply(
            status, (("retry-after", retry_after), ("content-type", "text/plain")), ((0, b"slow down"),)
        )

    return script


@pytest.mark.parametrize("status", [429, 503])
async def test_a_429_or_5xx_is_retried_after_its_retry_after(status: int) -> None:
    run, server = await _run(_limited(status, "0", ok_after=2), _spec("a"))
    assert _only(run).error is None
    assert run.retries == 2
    assert len(server.seen) == 3


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (500, "server_error")])
async def test_a_storm_is_reported_after_bounded_retries(status: int, kind: str) -> None:
    run, server = await _run(_limited(status, "0", ok_after=None), _spec("a"))
    record = _only(run)
    assert record.error == kind
    assert "after 3 retries" in record.error_detail
    assert len(server.seen) == 4
    assert run.retries == 3


async def test_a_retry_after_past_the_budget_is_reported_at_once() -> None:
    run, server = await _run(_limited(429, "3600", ok_after=None), _spec("a"))
    assert _only(run).error == "rate_limited"
    assert len(server.seen) == 1


async def test_a_closed_port_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        options = EndpointOptions(retry=QUICK, rtt_samples=2)
        run = await drive_endpoint(_spec("a"), f"http://127.0.0.1:{port}", 10.0, options)
    assert _only(run).error == "connect"
    assert run.rtt.connect_ms is None
    assert run.rtt.error


async def test_the_api_key_appears_in_no_record_even_when_the_server_echoes_it() -> None:
    def echo(body: dict[str, object], attempt: int) -> Reply:
        name = prompt_of(body)
        if name == "401":
            return Reply(401, (("content-type", "text/plain"),), ((0, f"bad key Bearer {KEY}".encode()),))
        error = json.dumps({"error": {"message": f"key {KEY} revoked"}}).encode()
        return Reply(pieces=((0, chunk_event("a")), (0, b"data: " + error + b"\n\n")))

    run, server = await _run(echo, _spec("401", "mid"))
    assert sorted(str(r.error) for r in run.records) == ["http_status", "stream_error"]
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in server.seen)
    assert all("[api key]" in r.error_detail for r in run.records)
    assert KEY not in repr(run)
    assert KEY not in json.dumps([r.model_dump() for r in run.records])


async def test_open_loop_records_its_seed_and_sends_every_prompt() -> None:
    spec = _spec("a", "b", "c", "d", request_rate=50.0)
    run, server = await _run(lambda b, a: scheduled(["x"], usage=(1, 1)), spec)
    assert run.seed == 11
    assert len(run.records) == 4
    assert len(server.seen) == 4
    assert all(r.error is None for r in run.records)
    # each prompt at its own planned instant, in the schedule's order; the instants its sends reached
    # the socket are the machine's (two planned 0.6 ms apart swapped at load 8), so only set apart
    by_prompt = sorted(run.records, key=lambda r: r.prompt_id)
    planned = [r.planned_s for r in by_prompt]
    assert planned == sorted(planned)
    assert len(set(planned)) == 4
    assert len({r.started_s for r in by_prompt}) == 4


@pytest.mark.parametrize("deadline_s", [20.0, 0.6])  # every send, or a deadline that cuts the schedule
async def test_an_open_loop_sends_the_submitters_schedule_and_passes_its_check(deadline_s: float) -> None:
    """The seed in the offer (`arrival_seed`) wins over the options'; the records of a real run, whole
    or cut by the deadline (the rest counted unsent), are the schedule the submitter checks them
    against (`scheduler.check_sends`), to the bit."""
    spec = _spec("a", "b", "c", request_rate=40.0, duration_s=1.0, arrival_seed=2**62 + 5)
    run, _ = await _run(lambda b, a: scheduled(["x"], usage=(1, 1)), spec, deadline_s=deadline_s)
    plan = open_loop(40.0, 2**62 + 5, 1.0, 3, MAX_RECORDS)
    assert run.seed == 2**62 + 5
    assert [r.planned_s for r in sorted(run.records, key=lambda r: r.planned_s or 0.0)] == list(
        plan[: len(run.records)]
    )
    assert len(run.records) + run.unsent == len(plan)
    assert (run.unsent > 0) == (deadline_s < 1.0)
    task = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=spec.with_(arrival_seed=None), timeout_s=30.0)
    stats = summarize_generation(run.records, run.wall_s, spec, unsent=run.unsent)
    m = derive(_endpoint_measurement(stats), task)
    assert check_sends(m, task, task.with_(generate=spec)) == m
    refused = check_sends(m, task, task.with_(generate=spec.with_(arrival_seed=7)))  # another seed's plan
    assert isinstance(refused, Refusal)
    assert refused.detail.startswith("generation.records"), refused.detail  # a count or a planned time


async def test_a_closed_loops_records_keep_its_slots_through_retries() -> None:
    """A real closed loop of 3 (each prompt's first ask answered 429, then retried) never has more
    than 3 requests in flight by its records, which the submitter's check holds it to. Nine sends
    (`max_requests`) end the loop, not its duration: how many fit in a duration is the machine's."""
    spec = _spec("a", "b", "c", "d", concurrency=3, duration_s=30.0)

    def script(body: dict[str, object], attempt: int) -> Reply:
        if attempt == 0:
            return _limited(429, "0", ok_after=None)(body, attempt)
        return scheduled(["x", "y"], first_s=0.01, every_s=0.005, usage=(1, 2))

    run, _ = await _run(script, spec, max_requests=9)
    assert len(run.records) == 9
    assert run.retries == 4  # each prompt's first ask (the server counts asks by prompt)
    task = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=spec, timeout_s=30.0)
    m = derive(_endpoint_measurement(summarize_generation(run.records, run.wall_s, spec)), task)
    assert check_sends(m, task, None) == m


async def test_a_duration_cycles_the_prompts_until_it_ends() -> None:
    """A closed loop with a duration takes the prompts again and again (five sends of two prompts, the
    loop ended by `max_requests`), and ends no sooner than its duration. How many sends a duration
    holds is the machine's on real clocks; on trio's virtual clock it is pinned
    (test_fleet_clock.py: each slot sends again as its answer ends, until the duration)."""

    def reply(body: dict[str, object], attempt: int) -> Reply:
        return scheduled(["x"], every_s=0.01, usage=(1, 1))

    run, _ = await _run(reply, _spec("a", "b", duration_s=30.0, concurrency=2), max_requests=5)
    assert Counter(r.prompt_id for r in run.records) == {"p0": 3, "p1": 2}
    assert all(r.error is None for r in run.records)
    began = trio.current_time()
    run, _ = await _run(reply, _spec("a", "b", duration_s=0.5, concurrency=2))
    assert trio.current_time() - began >= 0.5
    assert len(run.records) >= 2  # each slot sent, however late the machine let it begin
    assert all(r.error is None for r in run.records)


def test_run_endpoint_is_a_blocking_call_for_the_child() -> None:
    with serve_sse(lambda b, a: scheduled(["x", "y"], usage=(2, 2))) as server:
        run = run_endpoint(_spec("a"), server.url + "/v1", deadline_s=20.0)
    assert _only(run).output_tokens == 2


@pytest.mark.parametrize(
    ("url", "chat", "full"),
    [
        ("http://h:8000", True, "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/", False, "http://h:8000/v1/completions"),
        ("http://h/x/v1/chat/completions", True, "http://h/x/v1/chat/completions"),
    ],
)
def test_completions_url(url: str, chat: bool, full: str) -> None:
    assert completions_url(url, chat) == full


async def test_deadline_is_a_trio_deadline() -> None:
    hang = Reply(hang=True)
    with trio.fail_after(60):  # the whole run obeys the run deadline, however the server behaves
        # 3 s: the round-trip probe comes first, and on a loaded machine it alone can take 0.5 s
        run, server = await _run(lambda b, a: hang, _spec("a", "b", "c", concurrency=3), deadline_s=3.0)
    assert len(server.seen) == 3  # every request went out and hung ...
    assert {r.error for r in run.records} == {"deadline"}  # ... until the run's deadline cut it


def test_a_pinned_address_is_connected_to_and_the_name_is_never_resolved() -> None:
    options = EndpointOptions(connect_ip="127.0.0.1", rtt_samples=2)
    with serve_sse(lambda b, a: scheduled(["x"], usage=(1, 1))) as server:
        port = server.url.rsplit(":", 1)[1]
        url = f"http://endpoint.invalid:{port}"  # .invalid never resolves (RFC 6761)
        run = run_endpoint(_spec("a"), url, deadline_s=20.0, options=options)
    assert _only(run).error is None
    assert run.rtt.samples == 2
    assert server.seen[0].headers["host"] == f"endpoint.invalid:{port}"


@pytest.mark.parametrize("trusted", [True, False])
async def test_an_https_server_is_verified_and_its_handshake_timed(
    trusted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """https: the client trusts what the platform trusts (SSL_CERT_FILE here), and TlsMs is measured."""
    ca_file, server_ctx = self_signed(tmp_path, "127.0.0.1")
    (tmp_path / "other").mkdir()
    other_ca, _ = self_signed(tmp_path / "other", "127.0.0.1")  # the same name, signed by someone else
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file if trusted else other_ca))
    script = lambda body, attempt: scheduled(["Hi", " there"], first_s=0.01, every_s=0.01)  # noqa: E731
    options = EndpointOptions(retry=QUICK, rtt_samples=3, seed=11)
    with serve_sse(script, tls=server_ctx) as server:
        assert server.url.startswith("https://127.0.0.1:")
        run = await drive_endpoint(_spec("a", "b"), server.url, 20.0, options)
    assert run.rtt.connect_ms is not None
    if trusted:
        assert [r.error for r in run.records] == [None, None]
        assert all(r.output_text == "Hi there" for r in run.records)
        assert run.rtt.tls_ms is not None
        assert run.rtt.tls_ms > 0
        assert run.rtt.error == ""
    else:
        assert [r.error for r in run.records] == ["connect", "connect"]
        assert all("CERTIFICATE_VERIFY_FAILED" in r.error_detail for r in run.records)
        assert run.rtt.tls_ms is None
        assert "TLS handshake" in run.rtt.error
