"""The one request loop of the endpoint client: any schedule, sent from one place.

A `Schedule` is either closed (`slots` requests kept in flight, each worker sending the next prompt
when its last request ended) or open (planned send times, seconds after the start, each with its
prompt index). A lone worker's open loop plans its sends with `protocol.arrivals` (the same seeded
generator that deals a fleet's schedule); a fleet member sends its deal; a capacity level is either,
at that level. An open send is never early; one whose time has passed is sent at once, late, and its
record keeps both times (`planned_s`, `started_s`), so the lag shows. Every send overdue when the
loop wakes starts in that same pass of trio's scheduler: a loop held up (by the machine, or a burst
of reads) catches up at once instead of one send a pass, which left it seconds behind at 160 req/s
on a loaded machine (benchmarks/client_rates.py). Sends still planned when the run's deadline comes
are not dropped silently: `Load.unsent` counts them and the row says so.

Sessions (`GenerateSpec.sessions`: a dataset's `turns:`): what a schedule sends is a session, not a
request. A closed loop's slot replays one conversation turn by turn and takes the next when it ends
(concurrency counts sessions); an open loop's planned send (a fleet member's too, on the submitter's
clock) is a session's arrival, its first turn sent at the planned time and each later turn
`think_time_s` after the previous one's last token. Turn k's request carries turns 1..k-1 with the
answers this server gave (`Prompt.turn`), each cut to `MAX_PROMPT_CHARS`; a session whose carried
answers would pass `MAX_SESSION_CHARS` in all, or whose turn failed, ends there. No turn starts after
the run's `duration_s` or its deadline, nor while a watch has ended the run.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import trio

from drivers.endpoint.budget import Budget
from drivers.endpoint.completion import Outcome, complete, request_body
from drivers.endpoint.http1 import Pool
from drivers.endpoint.options import EndpointOptions
from protocol import FleetDeal, GenerateSpec, Prompt
from protocol.arrivals import open_loop
from protocol.generation import MAX_PROMPT_CHARS, MAX_RECORDS

if TYPE_CHECKING:
    from drivers.endpoint.completion import Server

MAX_INFLIGHT: Final = 1024  # open loop: requests in flight at once, whatever the arrival rate
MAX_SESSION_CHARS: Final = 256_000  # the answers one session carries, in all (a hostile server's bound)


@dataclass(frozen=True)
class Schedule:
    """What to send: `slots` in flight (closed), or `planned_s` with their `prompts` (open).

    `span_s` is the schedule's own span, for the achieved send rate: the run's `duration_s`, or for
    an open loop through the prompts once, the last planned time (None for a closed loop without one).
    """

    slots: int = 0
    planned_s: tuple[float, ...] = ()
    prompts: tuple[int, ...] = ()
    span_s: float | None = None


def closed(slots: int, duration_s: float | None) -> Schedule:
    return Schedule(slots=slots, span_s=duration_s)


def open_at(rate: float, seed: int, spec: GenerateSpec, most: int) -> Schedule:
    """Poisson sends at `rate` from the seeded generator: over `duration_s`, or one per prompt."""
    times = open_loop(rate, seed, spec.duration_s, len(spec.prompts), most)
    span = spec.duration_s or (times[-1] if times else 0.0)
    return Schedule(planned_s=times, prompts=tuple(range(len(times))), span_s=span)


def of_deal(deal: FleetDeal, duration_s: float | None) -> Schedule:
    """A fleet member's share: its planned sends (open), or its slots (closed)."""
    if deal.planned_s:
        return Schedule(planned_s=deal.planned_s, prompts=deal.prompts, span_s=duration_s)
    return Schedule(slots=deal.slots, span_s=duration_s)


@dataclass
class Load:
    """One run's state: the prompts still to send, and the outcomes so far (one trio task owns it)."""

    spec: GenerateSpec
    server: Server
    options: EndpointOptions
    client: Pool
    window: tuple[float, float]  # (deadline, start) in trio time
    outcomes: list[Outcome] = field(default_factory=list)
    watched_out: bool = False  # `options.watch` ended the run: nothing more is sent or kept
    unsent: int = 0  # planned sends the deadline came before
    # the perf clock (ns) at the start instant: records' send times are taken on it
    start_ns: int = 0
    budget: Budget = field(default_factory=Budget)  # what every request in flight keeps, together
    sessions: int = 0  # sessions started, for the next one's ordinal

    def __post_init__(self) -> None:
        self.start_ns = time.perf_counter_ns() - round((trio.current_time() - self.start) * 1e9)

    @property
    def deadline(self) -> float:
        return self.window[0]

    @property
    def start(self) -> float:
        return self.window[1]

    def prompts(self) -> Iterator[Prompt]:
        """Each prompt once, or cycled until `duration_s`; never past the deadline or `MAX_RECORDS`."""
        source = itertools.cycle(self.spec.prompts) if self.spec.duration_s else iter(self.spec.prompts)
        until = self.start + self.spec.duration_s if self.spec.duration_s else self.deadline
        for sent, prompt in enumerate(source):
            now = trio.current_time()
            most = self.options.max_requests or MAX_RECORDS
            if self.watched_out or sent >= most or now >= min(until, self.deadline):
                return
            yield prompt

    async def run(self, prompt: Prompt, planned: float | None = None) -> None:
        """A prompt as the spec sends it: one request, or a session of its turns."""
        if self.spec.sessions():
            await self.session(prompt, planned)
        else:
            await self.one(prompt, planned)

    async def session(self, prompt: Prompt, planned: float | None = None) -> None:
        """Replay `prompt`'s turns in order, each carrying the earlier ones with this server's answers."""
        ordinal, self.sessions = self.sessions, self.sessions + 1
        duration = self.spec.duration_s
        until = min(self.start + duration, self.deadline) if duration else self.deadline
        most = self.options.max_requests or MAX_RECORDS
        answers: tuple[str, ...] = ()
        for k in range(1, prompt.turns() + 1):
            if k > 1:
                await trio.sleep(min(self.spec.think_time_s, max(0.0, until - trio.current_time())))
                if self.watched_out or trio.current_time() >= until or len(self.outcomes) >= most:
                    return
            answer = await self.one(prompt.turn(k, answers), planned if k == 1 else None, (ordinal, k))
            if answer is None or sum(map(len, answers)) + len(answer) > MAX_SESSION_CHARS:
                return
            answers = (*answers, answer[:MAX_PROMPT_CHARS])

    async def one(
        self, prompt: Prompt, planned: float | None = None, turn: tuple[int, int] | None = None
    ) -> str | None:
        """Send one prompt and keep its outcome (with its planned send time, in an open loop; with its
        session and turn in a session). Returns the answer's text, None when the request failed."""
        deadline = self.deadline
        if self.options.request_timeout_s is not None:
            deadline = min(deadline, trio.current_time() + self.options.request_timeout_s)
        body = request_body(self.server.model, prompt, self.spec)
        outcome = await complete(
            self.client, self.server, body, deadline=deadline, retry=self.options.retry, budget=self.budget
        )
        record = outcome.record.with_(
            prompt_id=prompt.id,
            started_s=max(0.0, (outcome.sent_ns - self.start_ns) / 1e9),
            input_tokens_asked=prompt.input_tokens,
            output_tokens_asked=prompt.output_tokens,
            dataset_seed=self.spec.dataset_seed,
        )
        record = record if planned is None else record.with_(planned_s=planned)
        record = record if turn is None else record.with_(session=turn[0], turn=turn[1])
        answer = record.output_text if record.error is None else None  # before the budget may drop it
        record, reasoning = self.budget.ended(record, outcome.reasoning, urlsplit(self.server.url).netloc)
        outcome = replace(outcome, reasoning=reasoning)
        if self.watched_out:
            return None
        self.outcomes.append(outcome.with_record(record))
        if self.options.watch is not None and self.options.watch(self.outcomes):
            self.watched_out = True
        return answer


async def send(load: Load, schedule: Schedule) -> None:
    """Run `schedule` from the load's start instant until it is done or the deadline comes."""
    await trio.sleep_until(min(load.start, load.deadline))
    if schedule.planned_s:
        await _open(load, schedule)
    else:
        await _closed(load, schedule.slots)


async def _closed(load: Load, slots: int) -> None:
    prompts = load.prompts()  # shared: each worker takes the next one when it is free

    async def worker() -> None:
        for prompt in prompts:
            await load.run(prompt)

    async with trio.open_nursery() as nursery:
        for _ in range(slots):
            nursery.start_soon(worker)


async def _open(load: Load, schedule: Schedule) -> None:
    """Each planned send at its time (late if the client fell behind); what the deadline leaves, unsent."""
    prompts = load.spec.prompts
    inflight = trio.Semaphore(MAX_INFLIGHT)
    most = load.options.max_requests or MAX_RECORDS
    plan = list(zip(schedule.planned_s, schedule.prompts, strict=True))[:most]
    k = 0
    async with trio.open_nursery() as nursery:
        while k < len(plan):
            await trio.sleep_until(min(load.start + plan[k][0], load.deadline))
            if load.watched_out:
                return
            now = trio.current_time()
            if now >= load.deadline:
                load.unsent = len(plan) - k
                return
            # every send whose time has come starts in this pass: a loop that fell behind catches up
            # at once, not one send per pass of the scheduler
            while k < len(plan) and load.start + plan[k][0] <= now:
                planned, index = plan[k]
                try:
                    inflight.acquire_nowait()
                except trio.WouldBlock:
                    await inflight.acquire()
                    if load.watched_out:
                        return
                nursery.start_soon(_released, load, inflight, prompts[index % len(prompts)], planned)
                k += 1


async def _released(load: Load, inflight: trio.Semaphore, prompt: Prompt, planned: float) -> None:
    try:
        await load.run(prompt, planned)
    finally:
        inflight.release()


__all__ = ["MAX_INFLIGHT", "MAX_SESSION_CHARS", "Load", "Schedule", "closed", "of_deal", "open_at", "send"]
