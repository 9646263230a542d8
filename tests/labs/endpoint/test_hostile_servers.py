"""The endpoint client against hostile servers (tests/kit/hostile.py, a process of their own, real sockets).

For each fault, the real run function (`drive_endpoint`) runs in this trio loop beside a ticker that
wakes every 50 ms and keeps the most CPU the loop's thread spent between two wakes (a mechanism check:
a parser that held the loop would show here as it would in the worker's heartbeats; CPU time, not the
wall clock's gap, which a busy machine stretches with no fault of the client's) and the process's peak
RSS. Each must hold: the loop never holds a CPU-second between two wakes, RSS grows by less than the
run's memory budget plus `MARGIN`, and every request ends as the server's fault, of its kind, cut by
the run's deadline (a trio deadline: a loop held past it shows as held).

The budget here is smaller than the default (`drivers.endpoint.budget`), so that a few streams pass it:
`MARGIN` covers what the budget does not count (each connection's 64 KiB reads and h11's buffer, the
records, the allocator's own slack), measured at about 10 MiB here with 8 streams.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import httpx
import psutil
import pytest
import trio

from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions, EndpointRun, drive_endpoint
from drivers.endpoint.options import DRAIN_S
from protocol import Endpoint, GenerateSpec, Prompt

if TYPE_CHECKING:
    from trio_typing import TaskStatus

HOSTILE: Final = Path(__file__).resolve().parents[2] / "kit" / "hostile.py"
BUDGET: Final = (8 << 20, 1 << 16, 1 << 20, 1 << 20)  # bytes, pieces in flight; text, times kept
MARGIN: Final = 48 << 20
PIECE_BYTES: Final = 100  # a kept piece (a str or a float in a list), generously
TICK_S: Final = 0.05
MAX_HELD_S: Final = 1.0
DEADLINE_S: Final = 4.0
RETRY: Final = RetryPolicy(max_retries=2, max_wait_s=2.0, backoff_s=0.05)
TASK_TIMEOUT_S: Final = 60.0  # the run's own deadline in the timed-run test: a minute away


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    """The hostile server's root URL; its readiness is its own `ready` line."""
    child = subprocess.Popen(
        [sys.executable, "-P", str(HOSTILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert line[:1] == ["ready"], line
        yield line[1]
    finally:
        assert child.stdin is not None
        assert child.stdout is not None
        child.stdin.close()
        child.kill()
        child.wait(10)
        child.stdout.close()


@dataclass
class Watch:
    """The most CPU the loop's thread spent between two ticks (and the longest wall-clock gap, for the
    message), and the peak RSS, over a run."""

    base_rss: int
    gap_s: float = 0.0
    held_s: float = 0.0
    peak_rss: int = 0


async def _tick(watch: Watch, *, task_status: TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    me = psutil.Process()
    last, spent = trio.current_time(), time.thread_time()
    task_status.started()
    while True:
        await trio.sleep(TICK_S)
        now, cpu = trio.current_time(), time.thread_time()
        watch.gap_s, watch.held_s = max(watch.gap_s, now - last), max(watch.held_s, cpu - spent)
        watch.peak_rss = max(watch.peak_rss, me.memory_info().rss)
        last, spent = now, cpu


def _spec(concurrency: int) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(concurrency))
    return GenerateSpec(
        prompts=prompts, prompts_sha256="0" * 64, endpoint=Endpoint(model="m"), concurrency=concurrency
    )


async def _drive(url: str, concurrency: int, max_new_tokens: int = 64) -> tuple[EndpointRun, Watch]:
    options = EndpointOptions(retry=RETRY, rtt_samples=1, budget=BUDGET)
    watch = Watch(base_rss=psutil.Process().memory_info().rss)
    spec = _spec(concurrency).with_(max_new_tokens=max_new_tokens)
    async with trio.open_nursery() as nursery:
        await nursery.start(_tick, watch)
        run = await drive_endpoint(spec, url, DEADLINE_S, options)
        nursery.cancel_scope.cancel()
    return run, watch


def _seen(root: str) -> Counter[str]:
    return Counter(json.loads(httpx.get(f"{root}/seen", timeout=10).text))


CASES: Final = {
    # fault: (requests at once, the error kinds that name it)
    # the budget cuts the requests one by one as they cross it; one not yet across at the run's
    # deadline is cut there: which comes first is the client's read speed, the machine's weather
    # (at load 12: 7 of 8 cut by the budget, 1 by the deadline)
    "endless": (8, {"response_too_large", "deadline"}),
    "hugeline": (8, {"response_too_large", "not_sse", "deadline"}),  # 64-byte packets: slow to send
    "deepjson": (4, {"not_sse"}),
    "bigheader": (4, {"stream_error"}),
    "endlessheaders": (4, {"stream_error"}),
    "badchunk": (4, {"stream_error"}),
    "slowloris": (4, {"deadline"}),
    "gzipbomb": (4, {"not_sse"}),
    "redirect": (4, {"http_status"}),
    "http500": (4, {"server_error"}),
    "http429": (4, {"rate_limited"}),
}
DETAIL: Final = {  # what a record's detail says, by its kind
    "response_too_large": "server 127.0.0.1:",
    "not_sse": ("a line longer than", "content-encoding 'gzip'", "event data is not JSON"),
    "stream_error": "not HTTP/1.1",
    "deadline": "not complete by the run's deadline",
    "http_status": "HTTP 302",
    "server_error": "HTTP 500",
    "rate_limited": "HTTP 429",
}


def _named(kind: str | None, detail: str) -> bool:
    said = DETAIL.get(str(kind), ())
    return any(s in detail for s in ((said,) if isinstance(said, str) else said))


@pytest.mark.parametrize("fault", sorted(CASES))
async def test_a_hostile_server_never_stalls_the_loop_nor_passes_the_budget(hostile: str, fault: str) -> None:
    concurrency, kinds = CASES[fault]
    before = _seen(hostile)[fault]
    run, watch = await _drive(f"{hostile}/{fault}/v1", concurrency)
    received = _seen(hostile)[fault] - before
    held = f"the loop held {watch.held_s:.2f} CPU-s (its longest gap {watch.gap_s:.2f} s)"
    assert watch.held_s < MAX_HELD_S, held
    grown = watch.peak_rss - watch.base_rss
    assert grown < BUDGET[0] + BUDGET[1] * PIECE_BYTES + MARGIN, f"RSS grew {grown >> 20} MiB"
    assert len(run.records) == concurrency
    assert {r.error for r in run.records} <= kinds, [(r.error, r.error_detail) for r in run.records]
    assert all(_named(r.error, r.error_detail) for r in run.records), [r.error_detail for r in run.records]
    assert sum(r.attempts for r in run.records) == received  # every request the server got, retries too


async def test_a_run_past_its_budget_cuts_the_response_naming_the_server(hostile: str) -> None:
    """The run's budget, with answers that `max_tokens` allows to be long (at the largest a job may
    ask, a stream's answer may pass 8 MiB: `MAX_TOKEN_CHARS`)."""
    run, _ = await _drive(f"{hostile}/endless/v1", 8, max_new_tokens=32_768)
    cut = [r for r in run.records if r.error == "response_too_large"]
    assert cut, [(r.error, r.error_detail) for r in run.records]
    assert "past its budget of 8388608 bytes and 65536 pieces" in cut[0].error_detail


async def test_an_odd_retry_after_is_retried_on_the_back_off_and_every_attempt_counted(hostile: str) -> None:
    before = _seen(hostile)["http429"]
    run, _ = await _drive(f"{hostile}/http429/v1", 2)
    assert [r.attempts for r in run.records] == [RETRY.max_retries + 1] * 2
    assert run.retries == 2 * RETRY.max_retries
    waited = f"after 2 retries, {RETRY.backoff_s * 3:.1f} s waited"  # the back-off: 0.05 s, then 0.1 s
    assert all(waited in r.error_detail for r in run.records), [r.error_detail for r in run.records]
    assert _seen(hostile)["http429"] - before == 6


async def test_a_timed_run_ends_its_drain_after_the_duration_not_at_the_tasks_timeout(hostile: str) -> None:
    """A `duration_s` job against a server that never finishes an answer (slowloris): the requests in
    flight when sending ends are cut at the duration plus the drain (`DRAIN_S`, shortened here), as
    the server's `deadline`, though the run's own deadline (the task's timeout) is a minute away."""
    spec = _spec(2).model_copy(update={"duration_s": 1.0})
    options = EndpointOptions(retry=RETRY, rtt_samples=1, budget=BUDGET, drain_s=1.0)
    started = trio.current_time()
    run = await drive_endpoint(spec, f"{hostile}/slowloris/v1", TASK_TIMEOUT_S, options)
    took = trio.current_time() - started
    # ended by the drain, never before it (a trio deadline does not fire early), and not by the task's
    # timeout: bounds a busy machine cannot cross, it only makes the cut later
    assert 1.0 + 1.0 <= took < TASK_TIMEOUT_S, took
    assert run.records, "the two slots sent nothing"
    assert {r.error for r in run.records} == {"deadline"}, [(r.error, r.error_detail) for r in run.records]


def test_the_drain_is_the_documented_default() -> None:
    assert EndpointOptions().drain_s == DRAIN_S == 30.0
