"""The request loop's mechanism, not its speed: where a read is stamped, one sender, one generator.

- A read is stamped when its bytes arrived, not when the client got round to it: the client's parse
  of a burst is held (the test wraps `drivers.endpoint.attempt.take`) until the server has written a
  small chunk after it, on the same request and on another one in flight; the small chunk's recorded
  time precedes the end of that parse. An order of causes, not a timing: the server writes the chunk
  only once the parse has begun, and the parse ends only once the client's kernel has acknowledged
  the chunk's body to the end (`kit.sse_server`'s `Reply.cue`), so no load moves it, and a client
  that stamped a read when it read or parsed it (after the parse) would record it after.
- One module (`drivers.endpoint.sender`) holds the request loop; one (`protocol.arrivals`) the arrival
  generator; an open loop sends exactly the seeded schedule, and what its deadline prevents is
  counted as unsent, never dropped silently.
- An open loop that fell behind (its event loop held up) starts every overdue send in the same pass
  of trio's scheduler, not one a pass: a stalled client catches up at once instead of staying late.
"""

from __future__ import annotations

import ast
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import trio
from kit.sse_server import DONE_EVENT, Reply, chunk_event, scheduled, serve_sse, usage_event

import drivers.endpoint.attempt
from drivers.endpoint.attempt import Attempt
from drivers.endpoint.load import EndpointOptions, drive_endpoint, run_endpoint
from drivers.endpoint.sse import SseEvent
from protocol import Endpoint, GenerateSpec, Prompt
from protocol.arrivals import arrivals

ROOT = Path(__file__).resolve().parents[3]
BURST = 256  # the burst's deltas ("x" each, ~18 kB: one write, within the socket buffers, never held)
WAIT_S = 60.0  # the most either side waits for the other's cue: a hang fails, it never passes


def _spec(count: int = 1, **fields: object) -> GenerateSpec:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(count))
    values: dict[str, object] = {
        "prompts": prompts,
        "prompts_sha256": "0" * 64,
        "endpoint": Endpoint(model="m"),
    }
    return GenerateSpec.model_validate(values | fields)


class _HeldParse:
    """The client's parse of the burst, held until the server says the client has what follows.

    It wraps `drivers.endpoint.attempt.take` (the fold of one read's events into its attempt, stamps
    included): the first call that folds the burst's deltas ("x") sets `parsing` once it returned, then
    holds the event loop (the one thread, as a long parse does) until the server sets `written`, and
    notes when that parse ended (`parsed_ns`, perf clock). It keeps each attempt's `sent_ns` by its
    first delta's text, to put the record's times (ms after the request was sent) on the same clock.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parsing = threading.Event()
        self.written = threading.Event()
        self.held = False  # the server's `written` came within `WAIT_S`
        self.parsed_ns = 0
        self.sent_ns: dict[str, int] = {}
        self._take = drivers.endpoint.attempt.take
        monkeypatch.setattr(drivers.endpoint.attempt, "take", self.take)

    def take(self, events: list[SseEvent], attempt: Attempt, arrived_ns: int) -> None:
        self._take(events, attempt, arrived_ns)
        if attempt.text:
            self.sent_ns[attempt.text[0]] = attempt.sent_ns
        if attempt.text[:1] == ["x"] and not self.parsing.is_set():
            self.parsing.set()
            self.held = self.written.wait(WAIT_S)
            self.parsed_ns = time.perf_counter_ns()

    def stamped_ns(self, first: str, since_sent_ms: float) -> int:
        """A record's time (ms after its request was sent) on the perf clock, by its first delta."""
        return self.sent_ns[first] + round(since_sent_ms * 1e6)


def _burst() -> bytes:
    return b"".join(chunk_event("x") for _ in range(BURST))


def test_a_chunk_is_stamped_when_it_arrived_not_after_the_client_parsed_the_one_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One request: a burst, then a small chunk ("late") that the server writes only once the client
    is parsing the burst; that parse ends only once the client's kernel has acknowledged the body's
    last byte. The client reads the chunk after the parse, from the same socket: stamped on arrival,
    its time precedes the parse's end; stamped when read or parsed, it would follow it."""
    hold = _HeldParse(monkeypatch)

    def cue(piece: int) -> None:
        if piece == 1:  # the late chunk: not before the client parses the burst
            hold.parsing.wait(WAIT_S)
        elif piece == 2:  # the body ended and was acknowledged: every byte is in the client's socket
            hold.written.set()

    tail = chunk_event("late") + usage_event(1, BURST + 1) + DONE_EVENT
    late = Reply(pieces=((0.0, _burst()), (0.0, tail)), cue=cue)
    with serve_sse(lambda body, attempt: late) as server:
        run = run_endpoint(_spec(), server.url, deadline_s=120.0, options=EndpointOptions(rtt_samples=1))
    [record] = run.records
    assert record.error is None, record.error_detail
    assert record.output_text == "x" * BURST + "late"
    assert hold.held, "the server did not write the late chunk while the client parsed the burst"
    late_ns = hold.stamped_ns("x", record.token_times_ms[-1])
    assert late_ns < hold.parsed_ns, (
        f"the late chunk is stamped {(late_ns - hold.parsed_ns) / 1e6:.3f} ms after the parse it came "
        "during ended: stamped when read, not when it arrived"
    )


def test_a_chunk_that_came_while_another_request_was_parsed_is_stamped_when_it_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two requests at once: the burst's is answered only once the small one's request reached the
    server, and the small answer's chunks only once the client is parsing the burst; that parse ends
    only once the client's kernel has acknowledged the small body to its end. The event loop is held
    meanwhile, so the small request reads its first chunk after the parse: stamped when it came, its
    time precedes the parse's end."""
    hold = _HeldParse(monkeypatch)
    asked = threading.Event()  # the small request reached the server

    def big_cue(piece: int) -> None:
        if piece == 0:
            asked.wait(WAIT_S)

    def small_cue(piece: int) -> None:
        if piece == 0:
            asked.set()
            hold.parsing.wait(WAIT_S)
        elif piece == 3:  # the body ended and was acknowledged
            hold.written.set()

    big = Reply(pieces=((0.0, _burst() + usage_event(1, BURST) + DONE_EVENT),), cue=big_cue)
    small = scheduled(["a", "b"], usage=(1, 2))
    small = Reply(pieces=small.pieces, cue=small_cue)
    assert len(small.pieces) == 3
    with serve_sse(lambda body, attempt: big if "prompt 0" in str(body) else small) as server:
        run = run_endpoint(
            _spec(2, concurrency=2), server.url, deadline_s=120.0, options=EndpointOptions(rtt_samples=1)
        )
    by_id = {r.prompt_id: r for r in run.records}
    assert [by_id["p0"].error, by_id["p1"].error] == [None, None], [r.error_detail for r in run.records]
    assert by_id["p1"].output_text == "ab"
    assert hold.held, "the server did not write the small answer while the client parsed the burst"
    assert by_id["p1"].ttft_ms is not None
    chunk_ns = hold.stamped_ns("a", by_id["p1"].ttft_ms)
    assert chunk_ns < hold.parsed_ns, (
        f"the small chunk is stamped {(chunk_ns - hold.parsed_ns) / 1e6:.3f} ms after the other "
        "request's parse it came during ended: stamped when read, not when it came"
    )


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
