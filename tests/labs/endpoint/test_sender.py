"""The request loop's mechanism, not its speed: where a read is stamped, one sender, one generator.

- A read is stamped when its bytes arrived, not when the client got round to it: a server sends a
  large burst the client takes long to parse, then one small chunk soon after; the small chunk's
  recorded time is the server's gap after the burst, not the client's parse time.
- One module (`drivers.endpoint.sender`) holds the request loop; one (`protocol.arrivals`) the arrival
  generator; an open loop sends exactly the seeded schedule, and what its deadline prevents is
  counted as unsent, never dropped silently.
- An open loop that fell behind (its event loop held up) starts every overdue send in the same pass
  of trio's scheduler, not one a pass: a stalled client catches up at once instead of staying late.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from kit.sse_server import scheduled, serve_sse

from drivers.endpoint.load import EndpointOptions, drive_endpoint, run_endpoint
from protocol import Endpoint, GenerateSpec, Prompt, RequestRecord
from protocol.arrivals import arrivals

ROOT = Path(__file__).resolve().parents[3]
GAP_S = 0.05  # the server's pause before the small chunk (and between the burst and its last)
BURST = 64_000  # content deltas in the burst (~4.3 MB): long to parse (~250 ms here)
TRIES = 5  # runs that say nothing either way (one read held both) before the test gives up


def _spec(count: int = 1, **fields: object) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(count))
    values: dict[str, object] = {
        "prompts": prompts,
        "prompts_sha256": "0" * 64,
        "endpoint": Endpoint(model="m"),
    }
    return GenerateSpec.model_validate(values | fields)


@pytest.mark.exclusive  # arrival against parse time: the other worker's tests starve both
def test_a_chunk_is_stamped_when_it_arrived_not_after_the_client_parsed_the_one_before() -> None:
    """Stamped after parsing, the small chunk would trail the burst by the parse time; stamped on
    arrival, by the server's pause (plus the burst's own transfer). The server runs in its own process
    (in this one, the client's parsing held its pause up to 160 ms). A run in which one read held the
    burst's end and the chunk (they came while the client parsed what it read before) says nothing
    either way, both stamped alike, so the test tries up to `TRIES` (a loaded machine made three in a
    row)."""
    for _ in range(TRIES):
        with _served(_LATE_SERVER) as url:
            run = run_endpoint(_spec(), url, deadline_s=60.0, options=EndpointOptions(rtt_samples=1))
        [record] = run.records
        assert record.error is None, record.error_detail
        times = record.token_times_ms
        assert record.output_text.endswith("late")
        assert run.client_overhead_ms is not None
        parse_ms = run.client_overhead_ms  # one request: the parse time of all its reads
        gap_ms = times[-1] - times[-2]
        assert parse_ms > 4 * GAP_S * 1e3, f"the burst parsed in {parse_ms:.1f} ms: not long enough to tell"
        if gap_ms >= GAP_S * 1e3 / 3:  # two reads, not one holding both
            assert gap_ms < parse_ms / 2, (gap_ms, parse_ms)
            return
    raise AssertionError(
        f"one read held the burst's end and the chunk {TRIES} times (parse {parse_ms:.1f} ms)"
    )


_LATE_SERVER = """
import sys
from kit.sse_server import DONE_EVENT, Reply, chunk_event, serve_sse, usage_event
gap, count = float(sys.argv[1]), int(sys.argv[2])
burst = b"".join(chunk_event("x") for _ in range(count))
late = Reply(pieces=((0.0, burst), (gap, chunk_event("late")), (0.0, usage_event(1, count + 1) + DONE_EVENT)))
with serve_sse(lambda body, attempt: late) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""

_SERVER = """
import sys, threading
from kit.sse_server import DONE_EVENT, Reply, chunk_event, scheduled, serve_sse, usage_event
burst = b"".join(chunk_event("x") for _ in range(int(sys.argv[2])))
big = Reply(pieces=((0.0, burst + usage_event(1, int(sys.argv[2])) + DONE_EVENT),))
small = scheduled(["a", "b"], first_s=float(sys.argv[1]), every_s=0.001, usage=(1, 2))
with serve_sse(lambda body, attempt: big if "prompt 0" in str(body) else small) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""


@contextmanager
def _served(script: str) -> Iterator[str]:
    """A server script (`GAP_S`, `BURST`) in its own process, its URL while the block runs."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(GAP_S), str(BURST)],
        cwd=Path(__file__).resolve().parents[2],  # tests/, where the script finds `kit`
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        child.communicate("", timeout=30)


def _burst_then_chunk() -> tuple[RequestRecord, RequestRecord, float]:
    """One run of two requests at once against a server in its own process (in this one, the client's
    parsing would delay its writes): the burst's record, the small one's, and the burst's parse ms."""
    with _served(_SERVER) as url:
        run = run_endpoint(
            _spec(2, concurrency=2), url, deadline_s=60.0, options=EndpointOptions(rtt_samples=1)
        )
    by_id = {r.prompt_id: r for r in run.records}
    assert [by_id["p0"].error, by_id["p1"].error] == [None, None]
    assert run.client_overhead_ms is not None
    return by_id["p0"], by_id["p1"], 2 * run.client_overhead_ms  # the median of two: the burst's and a
    # negligible one


@pytest.mark.exclusive  # arrival against parse time: the other worker's tests starve both
def test_a_chunk_that_came_while_another_request_was_parsed_is_stamped_when_it_came() -> None:
    """The small request's first chunk comes `GAP_S` after it was sent; the burst's body ended before
    that (its transfer took a few ms, under a loaded suite up to 29) and the one event loop then parsed
    it for hundreds of ms, past that chunk's arrival: stamped when read, its time after the burst's
    end would carry the parse time. A run in which the burst's body was still arriving when the chunk
    came says nothing either way (the loop was free to stamp it), so the test tries up to `TRIES`."""
    for _ in range(TRIES):
        burst, small, burst_parse_ms = _burst_then_chunk()
        assert burst_parse_ms > 4 * GAP_S * 1e3, burst_parse_ms  # the parse dwarfs the server's gap
        assert small.ttft_ms is not None
        burst_end = burst.started_s * 1e3 + burst.e2e_ms
        chunk = small.started_s * 1e3 + small.ttft_ms
        if chunk > burst_end:  # the chunk came while the burst was parsed
            assert chunk - burst_end < burst_parse_ms / 2, (chunk - burst_end, burst_parse_ms)
            return
    raise AssertionError(f"the burst's body ended after the chunk {TRIES} times (last: {burst_end:.1f} ms)")


async def test_an_open_loop_sends_the_seeded_schedule_and_counts_what_its_deadline_prevented() -> None:
    rate, duration, seed = 40.0, 3.0, 7
    planned = arrivals(rate, duration, seed)
    quick = scheduled(["a"], usage=(1, 1))
    spec = _spec(5, request_rate=rate, duration_s=duration)
    options = EndpointOptions(seed=seed, rtt_samples=1)
    with serve_sse(lambda body, attempt: quick) as server:
        run = await drive_endpoint(spec, server.url, 1.5, options)  # the deadline cuts the schedule
    sent = sorted(r.planned_s for r in run.records if r.planned_s is not None)
    assert len(sent) == len(run.records)
    assert sent == sorted(planned[: len(sent)])  # the same generator, the same seed: the same times
    assert run.unsent > 0
    assert len(run.records) + run.unsent == len(planned)  # none dropped without being counted
    assert all(r.started_s >= r.planned_s - 1e-3 for r in run.records if r.planned_s is not None)


class _Passes(trio.abc.Instrument):
    """Counts the scheduler's passes (one I/O wait each) and the pass in which each send was started."""

    def __init__(self) -> None:
        self.passes = 0
        self.sends: list[int] = []

    def after_io_wait(self, timeout: float) -> None:
        self.passes += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name == "drivers.endpoint.sender._released":
            self.sends.append(self.passes)


async def test_an_open_loop_held_up_starts_every_overdue_send_in_one_pass() -> None:
    rate, duration, stall_s = 200.0, 1.0, 0.3
    quick = scheduled(["a"], usage=(1, 1))
    spec = _spec(5, request_rate=rate, duration_s=duration)
    options = EndpointOptions(seed=7, rtt_samples=1)
    passes = _Passes()
    trio.lowlevel.add_instrument(passes)

    async def hold_up() -> None:  # blocks the event loop once the schedule has begun
        while not passes.sends:  # noqa: ASYNC110 (an instrument sees the first send, not a task)
            await trio.sleep(0.001)
        time.sleep(stall_s)  # noqa: ASYNC251 (on purpose: the loop is held up)

    try:
        with serve_sse(lambda body, attempt: quick) as server:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold_up)
                run = await drive_endpoint(spec, server.url, 30.0, options)
    finally:
        trio.lowlevel.remove_instrument(passes)
    planned = arrivals(rate, duration, 7)
    assert len(run.records) == len(planned)
    assert run.unsent == 0
    assert len(passes.sends) == len(planned)
    # ~60 sends fell due while the loop was held up: all start in the pass after it (one a pass, the
    # most in any pass would be 1)
    most = max(Counter(passes.sends).values())
    assert most >= 20, Counter(passes.sends).most_common(3)
    assert all(r.started_s >= r.planned_s - 1e-3 for r in run.records if r.planned_s is not None)


def _calls(path: Path, names: set[str]) -> set[str]:
    """The names among `names` that the module at `path` calls or defines."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in names:
                found.add(name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name in names:
            found.add(node.name)
    return found


def test_one_module_sends_requests_and_one_generates_arrivals() -> None:
    sources = [
        p for layer in ("drivers", "protocol", "scheduler", "node") for p in (ROOT / layer).rglob("*.py")
    ]
    drivers = [p for p in sources if p.relative_to(ROOT).parts[0] == "drivers"]
    senders = {p.name for p in drivers if _calls(p, {"complete"})}
    # the request loop; the server probe sends one request per model and the submitter's floor probe
    # five one-token requests (issue 50), each on no schedule
    assert senders == {"sender.py", "servers.py", "completion.py", "floorprobe.py"}, senders
    timed = {p.name for p in drivers if _calls(p, {"sleep_until", "Semaphore"})}
    assert timed == {"sender.py"}, timed
    generators = {
        p.relative_to(ROOT).as_posix()
        for p in sources
        if _calls(p, {"expovariate", "log1p", "SplitMix64", "Random", "gammavariate"})
    }
    # the DHT walk draws its next server among the k closest (node/p2p/walk.py): no arrivals
    assert generators - {"node/p2p/walk.py"} == {"protocol/arrivals.py"}, generators
