"""A server's failures are the server's: every request failed is a `server` failure naming its answers;
a partly failed run is a measurement whose figures cover only the successful requests."""

from __future__ import annotations

import re

import pytest
from kit.sse_server import Reply, prompt_of, scheduled, serve_sse

import drivers
from drivers.endpoint.attempt import MAX_TOKEN_CHARS
from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions, drive_endpoint
from drivers.endpoint.task import measure_endpoint
from protocol import (
    CapacitySpec,
    ComputeUnit,
    Endpoint,
    FailureReason,
    GenerateSpec,
    Prompt,
    RequestRecord,
    Slo,
    Stage,
    TaskSpec,
)
from protocol.genstats import summarize_generation
from scheduler.results.genrows import generation_columns

QUICK = RetryPolicy(max_retries=2, max_wait_s=2.0, backoff_s=0.01)
OPTIONS = EndpointOptions(retry=QUICK, rtt_samples=1)


def _task(n: int) -> TaskSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(n))
    spec = GenerateSpec(prompts=prompts, prompts_sha256="0" * 64, endpoint=Endpoint(model="m"))
    return TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=spec, timeout_s=30.0)


async def test_a_server_that_fails_every_request_fails_the_task_naming_its_status() -> None:
    boom = Reply(status=500, headers=(), pieces=((0.0, b"boom"),))
    with serve_sse(lambda body, attempt: boom) as server, pytest.raises(drivers.TaskFailed) as caught:
        await measure_endpoint(_task(3), server.url, OPTIONS)
    failed = caught.value
    assert (failed.reason, failed.stage) == (FailureReason.SERVER, Stage.RUN)
    received = len(server.seen)
    assert received == 9  # 3 requests, each tried 3 times: every one of them counted
    assert (
        failed.detail
        == f"all 3 requests failed: HTTP 500 x3; the server received {received}, retries included"
    )


async def test_a_partly_failed_run_keeps_its_error_share_and_figures_of_the_successes_only() -> None:
    def script(body: dict[str, object], attempt: int) -> Reply:
        if prompt_of(body) == "prompt 0":
            return Reply(status=503, headers=(("retry-after", "-3"),), pieces=((0.0, b"busy"),))
        return scheduled(["a", "b", "c"], first_s=0.01, every_s=0.01, usage=(2, 3))

    with serve_sse(script) as server:
        m = await measure_endpoint(_task(4), server.url, OPTIONS)
    g = m.generation
    assert g is not None
    assert (g.requests, g.errors, g.requests_sent) == (4, 1, len(server.seen))
    assert g.requests_sent == 3 + 3  # the failed one tried 3 times, the others once
    assert g.e2e_ms.n == g.ttft_ms.n == 3
    assert g.ttft_ms.min >= 10
    columns = generation_columns(g)
    assert (columns["ErrorShare"], columns["RequestsSent"]) == ("0.2500", "6")
    assert float(columns["TtftMsMedian"]) >= 10


def test_figures_of_a_run_with_no_success_are_empty_never_zero() -> None:
    failed = RequestRecord(prompt_id="p0", prompt_tokens=0, output_tokens=0, e2e_ms=1.0, error="server_error")
    spec = _task(1).generate
    assert spec is not None
    stats = summarize_generation([failed, failed], 0.1, spec)
    columns = generation_columns(stats)
    for name in ("TtftMsMedian", "TpotMsMedian", "E2eMsMedian", "ItlMsP99", "DecodeTokPerS", "RequestPerS",
                 "OutputTokPerS", "OutputTokensMean", "PrefillTokPerS"):  # fmt: skip
        assert columns[name] == "", name
    assert (columns["Errors"], columns["ErrorShare"]) == ("2", "1.0000")


async def test_a_capacity_search_whose_every_request_failed_is_the_servers_failure() -> None:
    task = _task(2)
    assert task.generate is not None
    search = CapacitySpec(max_concurrency=2, level_s=0.5, level_requests=4)
    task = task.with_(generate=task.generate.with_(capacity=search, slo=Slo(ttft_ms=1000)))
    boom = Reply(status=503, headers=(), pieces=((0.0, b"down"),))
    with serve_sse(lambda body, attempt: boom) as server, pytest.raises(drivers.TaskFailed) as caught:
        await measure_endpoint(task, server.url, OPTIONS)
    assert caught.value.reason == FailureReason.SERVER
    assert "HTTP 503 x" in caught.value.detail
    assert caught.value.detail.endswith(f"the server received {len(server.seen)}, retries included")


async def test_an_error_answer_whose_body_never_ends_is_reported_not_waited_on() -> None:
    """A 500 whose body never ends (a server stuck writing its error page) is the server's error, read
    for `HEAD_S` for its detail, not a request held until the run's deadline (30 s here)."""
    stuck = Reply(status=500, headers=(), pieces=((0.0, b"model failed"),), hang=True)
    once = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1)
    with serve_sse(lambda body, attempt: stuck) as server, pytest.raises(drivers.TaskFailed) as caught:
        await measure_endpoint(_task(2), server.url, once)
    said = "all 2 requests failed: HTTP 500 x2; the server received 2, retries included"
    assert caught.value.detail == said  # not "deadline x2": the answer was not waited on
    assert len(server.seen) == 2


async def test_the_text_ended_requests_keep_is_held_to_the_runs_budget() -> None:
    """Past the run's text budget a record keeps its times and counts, not its text (as a result
    trimmed to fit an envelope): a server's long answers cannot pile up in the records."""
    answer = ["x" * 100] * 3  # 300 characters each
    options = EndpointOptions(retry=QUICK, rtt_samples=1, budget=(1 << 20, 1 << 16, 1000, 1 << 20))
    task = _task(6)
    assert task.generate is not None
    with serve_sse(lambda body, attempt: scheduled(answer, usage=(2, 3))) as server:
        run = await drive_endpoint(task.generate, server.url, 30.0, options)
    assert [r.error for r in run.records] == [None] * 6
    assert [len(r.output_text) for r in run.records] == [300, 300, 300, 0, 0, 0]
    assert [r.text_dropped for r in run.records] == [False] * 3 + [True] * 3
    assert all(r.output_tokens == 3 and len(r.token_times_ms) == 3 for r in run.records)


async def test_the_token_times_ended_requests_keep_are_held_to_the_runs_budget() -> None:
    """Past the run's budget of kept token times a request ends `response_too_large`, naming the
    server, and keeps none: a server streaming millions of tiny deltas per answer cannot fill memory."""
    options = EndpointOptions(retry=QUICK, rtt_samples=1, budget=(1 << 20, 1 << 16, 1 << 20, 7))
    task = _task(4)
    assert task.generate is not None
    with serve_sse(lambda body, attempt: scheduled(["a", "b", "c"], usage=(2, 3))) as server:
        run = await drive_endpoint(task.generate, server.url, 30.0, options)
    assert [r.error for r in run.records] == [None, None, "response_too_large", "response_too_large"]
    assert [len(r.token_times_ms) for r in run.records] == [3, 3, 0, 0]
    assert "server 127.0.0.1:" in run.records[2].error_detail
    assert "past its budget of 7" in run.records[2].error_detail


async def test_an_answer_past_what_its_max_tokens_can_carry_is_the_servers_fault_whatever_the_speed() -> None:
    """An endless valid stream is cut when its answer passes `max_tokens` x `MAX_TOKEN_CHARS`, not
    when the run's budget or deadline comes (which a busy machine's slow reads put off past the
    drain: 58,816 tokens in 33 s, a `timeout` once): the task fails `server`, naming the bound. An
    answer at the bound (two tokens of the longest kind) is an answer."""
    spec = _task(3).generate
    assert spec is not None
    task = _task(3).with_(generate=spec.with_(max_new_tokens=2))
    at_bound = ["y" * MAX_TOKEN_CHARS] * 2
    with serve_sse(lambda body, attempt: scheduled(at_bound, usage=(2, 2))) as server:
        m = await measure_endpoint(task, server.url, OPTIONS)
    assert m.generation is not None
    assert m.generation.errors == 0
    past = ["x" * 64] * (2 * MAX_TOKEN_CHARS // 64 + 1)  # one delta past the bound: the rest never read
    with (
        serve_sse(lambda body, attempt: scheduled(past, usage=(2, 2))) as server,
        pytest.raises(drivers.TaskFailed) as caught,
    ):
        await measure_endpoint(task, server.url, OPTIONS)
    assert caught.value.reason == FailureReason.SERVER
    said = caught.value.detail
    assert said.startswith("all 3 requests failed: response_too_large x3;"), said


async def test_requests_that_only_waited_past_the_clients_deadline_are_a_timeout_not_the_servers() -> None:
    """Issue 49, scope 4: a server answering one request at a time keeps the others waiting; a
    request that waited past the client's deadline with no token is the client's deadline (TIMEOUT,
    the wait named), not a failure of the server, which answered 200 and failed nothing."""
    slow = Reply(status=200, pieces=((5.0, b""),), hang=True)  # the head at once, then no token
    task = _task(1).with_(timeout_s=1.0)
    once = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1)
    with serve_sse(lambda body, attempt: slow) as server, pytest.raises(drivers.TaskFailed) as caught:
        await measure_endpoint(task, server.url, once)
    failed = caught.value
    assert (failed.reason, failed.stage) == (FailureReason.TIMEOUT, Stage.RUN)
    assert failed.detail.startswith("all 1 requests passed the client's deadline"), failed.detail
    assert "none failed by the server" in failed.detail
    assert re.search(r"\d+\.\d s after the request was written the server had sent no token", failed.detail)
    assert failed.detail.endswith("the server received 1, retries included")


async def test_a_run_with_deadlines_and_server_errors_is_the_servers_failure_naming_both() -> None:
    def script(body: dict[str, object], attempt: int) -> Reply:
        if prompt_of(body) == "prompt 0":
            return Reply(status=500, headers=(), pieces=((0.0, b"boom"),))
        return Reply(status=200, pieces=((5.0, b""),), hang=True)

    task = _task(2).with_(timeout_s=1.5)
    once = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1)
    with serve_sse(script) as server, pytest.raises(drivers.TaskFailed) as caught:
        await measure_endpoint(task, server.url, once)
    assert caught.value.reason == FailureReason.SERVER
    assert "HTTP 500 x1" in caught.value.detail
    assert "deadline x1" in caught.value.detail
