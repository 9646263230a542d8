"""A load client's records checked against the schedule the submitter gave it, before anything shows them.

`check_figures` re-derives a load's figures from its records; it cannot tell whether those records
are the requests the client was given to send. This check can, where the submitter made the schedule:

- **A fleet member** (`scheduler.deal`, signed into the member's offer). Each record of an open loop
  must be one of the deal's planned sends, once, sent at its planned time: refused are more records
  than the deal has planned sends; a record whose `planned_s` is not a planned time of the deal
  (within `PLAN_TOL_S`), or none at all (a closed loop's records have none: its deal has slots, not
  times); two records of one planned send (each dealt request goes once); a record sent
  (`started_s`) before its planned time less the member's clock bound, or after it plus the clock
  bound plus `LATE_SLACK_S` (a member that fires missed sends at once); a closed loop's records
  after `duration_s` plus both.
- **A lone worker's open loop** (`request_rate`, no fleet): the submitter draws its seed
  (`GenerateSpec.arrival_seed`, in the offer), so it knows every planned send
  (`protocol.arrivals.open_loop`) and the prompt each one carries. The records must be the first
  planned sends, each once, with its planned time and prompt, never sent early; late is allowed
  (a client that falls behind is shown saturated, its lag in the row, never refused for it); and
  the planned sends it did not send are the submitter's count (`unsent`): a worker that hides a
  backlog by planning its own slower schedule, skipping sends, or saying none were left is refused.
- **Each level of a search over request rates**: an open loop at the level's rate from the same
  seed, of at most the requests its budget left (`protocol.capacity.level_budgets`); held as a lone
  open loop is, except that a level that ended early left its requests in flight out (its records
  are held to their planned sends, its `unsent` to no more than the schedule left).
- **A closed loop** (a lone one, a fleet member's slots, each level of a concurrency search): never
  more requests in flight at once than its slots (`in_flight_problems`), and never more requests than
  its slots could send over the run, one after another, each as long as its shortest
  (`slots_problems`: slots x (span / the shortest E2E + 1)).
- **Sessions** (`GenerateSpec.sessions`, every load kind; `session_problems`): a planned send is a
  session's arrival, so only first turns are held to the plan above; each later turn k of a session
  follows its turn k - 1 (same prompt, that turn succeeded: a failed turn ends a session), starts no
  earlier than that turn's last token plus `think_time_s`, and a session has at most its prompt's
  turns, each once. A closed loop's in-flight and slot checks count every turn (a slot sends its
  session's turns one after another). Records of a load without sessions carry no session or turn.
- **Physics, for every load** (`physics_problems`, before the schedule): a successful request's E2E
  at least its TTFT, both above zero, and its TTFT above half the round trip its worker measured to
  the server less `RTT_SLACK_MS` (`rtt_ms`, a median: one request may be quicker than the median,
  none is quicker than half of it; a first byte back needs the request to go and come back);
  records of zero length, a thousand at one instant, were never sent.
- **The server's floor, for fleets and lone loops** (`serverfloor.floor_problems`, after physics):
  where this submitter measured the server itself before the job, no successful record is quicker
  than the floor it found, and a closed loop's slot bound divides by that floor, not only by the
  records' own shortest (the liar's choice). The physics above reads the worker's own round trip;
  the floor reads nothing the worker signs (its docstring gives the cheater's view). The server's
  own count (`servercount`, where the job names its metrics) is applied after this check, by the
  submitter's verdict (`node.submitter.verdict`), since it needs two reads of the server.

Refused as `invalid`, naming the field, the worker's value and the bound. A result without a known
schedule (a lease reclaimed after a submitter restart whose offer the store did not keep) is refused
`internal`: it cannot be checked, and says nothing about the worker's honesty. The merged fleet row
is made only from results that pass, so it counts verified, dealt requests.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from protocol import FailureReason, FleetDeal, GenerateSpec, Measurement, RequestRecord, TaskSpec
from protocol.arrivals import open_loop
from protocol.capacity import by, level_budgets, level_spec
from protocol.clientload import SATURATED_LAG_MS
from protocol.generation import MAX_RECORDS
from scheduler.language.fleet import is_fleet
from scheduler.verification.figures import Refusal
from scheduler.verification.serverfloor import ServerFloor, floor_problems

PLAN_TOL_S: Final = 1e-9
"""A planned time travels as a float64 both ways (msgpack doubles): an honest record echoes it to the bit;
a nanosecond absorbs another platform's last digit. Two arrivals can fall closer than that (5,000 a
second: about one run of a hundred), so a record claims the nearest planned time (`_slot`)."""
OVERLAP_TOL_S: Final = 1e-6
"""A closed loop's slot sends its next request after its last one ended; this absorbs the rounding of
two send times and a duration, each taken on the perf clock in nanoseconds."""
EARLY_TOL_S: Final = 1e-6
"""An honest member never sends early (it sleeps until the planned instant); this absorbs the rounding of
`start + planned - start` on its monotonic clock."""
LATE_SLACK_S: Final = 1.0
"""How far behind its schedule a member's send may be, beyond its clock bound: 100 x the lag that flags a
saturated client (`SATURATED_LAG_MS`, 10 ms), so an honest client that falls behind is shown saturated
long before it is refused, while a member that fires missed sends at once (seconds late) is refused."""
assert LATE_SLACK_S * 1e3 >= 100 * SATURATED_LAG_MS
RTT_SHARE: Final = 0.5
"""A successful request's TTFT is at least this share of its worker's median round trip to the server,"""
RTT_SLACK_MS: Final = 1.0
"""less this: where the worker's kernel does not time its handshake (`drivers.endpoint.rtt`), a loaded
client's connect times carry its own scheduling delay (milliseconds on loopback), which a kernel-stamped
first byte does not, so a round trip of a few ms can be the client's, not the network's; over a real
network the floor stays most of the trip."""


def check_sends(
    m: Measurement, spec: TaskSpec, signed: TaskSpec | None, floor: ServerFloor | None = None
) -> Measurement | Refusal:
    """The measurement unchanged when its records fit the load the submitter gave its endpoint run (a
    deal, an open loop's seed, a closed loop's slots, a capacity search's levels), else why it is
    refused; a task with no endpoint (a tensor task, a local model's generation) passes as it is.

    Args:
        m: a measurement whose figures `check_figures` derived again.
        spec: the task's spec as the campaign gave it.
        signed: the spec of the offer this attempt answered, with the member's deal or the open
            loop's seed (a lease reclaimed after a restart: the offer spec the campaign store kept;
            None if it kept none).
        floor: the server's floor as this submitter measured it itself (`serverfloor`); None: none
            measured (an open loop's, or a server it could not reach), physics and the schedule only.
    """
    generate = spec.generate
    if generate is None or generate.endpoint is None:
        return m
    given = signed.generate if signed is not None else None
    records, unsent = (m.generation.records, m.generation.unsent) if m.generation is not None else ((), 0)
    every = records
    records = tuple(r for r in every if (r.turn or 1) == 1)  # a planned send is a session's first turn
    floor_ms, who = floor.floor_ms if floor is not None else 0.0, ""
    if is_fleet(generate):
        if given is None or given.deal is None:
            return _unknown("this member's deal")
        who = f"fleet member {given.deal.member} of {given.deal.size}"
        problems = deal_problems(records, unsent, given.deal, generate, every, floor_ms)
    elif draws_seed(generate):
        if given is None or given.arrival_seed is None:
            return _unknown("this open loop's seed")
        if generate.capacity is None:
            problems = open_loop_problems(records, unsent, generate, given.arrival_seed)
        else:
            problems = rate_levels_problems(m, generate, given.arrival_seed)
    elif generate.capacity is not None:
        problems = _concurrency_levels(m, floor_ms)
    else:
        wall_s = m.generation.wall_s if m.generation is not None else 0.0
        span = (generate.duration_s or wall_s) + LATE_SLACK_S
        problems = _first(
            in_flight_problems(every, generate.concurrency),
            slots_problems(every, generate.concurrency, span, floor_ms=floor_ms),
        )
    checks = (physics_problems(m), floor_problems(m, floor, who), session_problems(every, generate), problems)
    problem = next(_first(*checks), None)
    return m if problem is None else Refusal(FailureReason.INVALID, problem)


def draws_seed(spec: GenerateSpec) -> bool:
    """Whether the submitter draws the seed of a job's open-loop sends (`arrival_seed`, in each offer):
    a lone worker's open loop, or a search over request rates (its levels share the seed: common
    random numbers, so levels differ by their rate and not by their draws). A fleet's is its deal's."""
    if spec.endpoint is None or is_fleet(spec):
        return False
    return spec.request_rate is not None or (
        spec.capacity is not None and by(spec.capacity) == "request_rate"
    )


def _unknown(what: str) -> Refusal:
    why = f"records: {what} is not known to this submitter (a lease reclaimed after a restart whose "
    why += "offer the campaign store did not keep), so they cannot be checked against it"
    return Refusal(FailureReason.INTERNAL, why)


@dataclass(frozen=True)
class _Plan:
    """Planned sends as the client sends them, in order: each time and the index of its prompt.

    `name` says whose plan it is in a refusal ("deal" or "schedule"); `bound` is the client's clock
    bound (0 on its own clock); `late` how far past its time plus the bound a send may go (None: any);
    `where` the path of the records' generation figures.
    """

    times: tuple[float, ...]
    prompts: tuple[int, ...]
    name: str
    bound: float = 0.0
    late: float | None = None
    where: str = "generation"


def deal_problems(
    records: Sequence[RequestRecord],
    unsent: int,
    deal: FleetDeal,
    spec: GenerateSpec,
    every: Sequence[RequestRecord] | None = None,
    floor_ms: float = 0.0,
) -> Iterator[str]:
    """Every way a member's records depart from its deal, the count first (`records`: the sessions'
    first turns; `every`: all turns, which a closed loop's slots send; `floor_ms`: the server's floor
    that a closed loop's slot bound divides by, `serverfloor`)."""
    if not deal.planned_s:
        yield from _closed_loop(records if every is None else every, deal, spec, floor_ms)
        return
    pairs = sorted(zip(deal.planned_s, deal.prompts, strict=True))  # `scheduler.deal` makes them ascending
    times, prompts = tuple(t for t, _ in pairs), tuple(p for _, p in pairs)
    plan = _Plan(times, prompts, "deal", deal.offset_bound_s or 0.0, LATE_SLACK_S)
    yield from _first(_planned(records, spec, plan), _in_order(records, unsent, plan))


def open_loop_problems(
    records: Sequence[RequestRecord], unsent: int, spec: GenerateSpec, seed: int
) -> Iterator[str]:
    """Every way a lone open loop's records depart from the schedule of `seed`, the count first."""
    assert spec.request_rate is not None
    times = open_loop(spec.request_rate, seed, spec.duration_s, len(spec.prompts), MAX_RECORDS)
    plan = _Plan(times, tuple(range(len(times))), "schedule")
    yield from _first(_planned(records, spec, plan), _in_order(records, unsent, plan))


def rate_levels_problems(m: Measurement, spec: GenerateSpec, seed: int) -> Iterator[str]:
    """A rate search's levels against their schedules: each level an open loop at its rate from the
    search's seed, for `level_s`, of at most the requests its budget left (`level_budgets`). A level
    that ended early left out the requests then in flight, so only its records are held to their
    planned sends; one that ran to its end sent the first ones and counts the rest unsent."""
    if m.capacity is None:
        return
    levels = m.capacity.levels
    budgets = level_budgets(spec, [len(level.generation.records) for level in levels])
    for i, level in enumerate(levels):
        ran = level_spec(spec, level.level)
        times = open_loop(level.level, seed, ran.duration_s, len(spec.prompts), budgets[i])
        where = f"capacity.levels[{i}].generation"
        plan = _Plan(times, tuple(range(len(times))), "level's schedule", where=where)
        records, unsent = level.generation.records, level.generation.unsent
        checks = [_planned(records, ran, plan)]
        if level.ended_early is None:
            checks.append(_in_order(records, unsent, plan))
        elif unsent > len(times) - len(records):
            checks.append(
                iter([f"{where}.unsent: the worker says {unsent}, more than the level's schedule leaves"])
            )
        problem = next(_first(*checks), None)
        if problem is not None:
            yield problem
            return


def _first(*checks: Iterator[str]) -> Iterator[str]:
    """The first problem of the first check that finds one (a later check assumes the earlier held)."""
    for check in checks:
        problem = next(check, None)
        if problem is not None:
            yield problem
            return


def _planned(records: Sequence[RequestRecord], spec: GenerateSpec, plan: _Plan) -> Iterator[str]:
    """Each record one of the planned sends, once, with its prompt, sent within its time and bounds."""
    times = plan.times
    if len(records) > len(times):
        more = f"more than the {len(times)} sends of the {plan.name}"
        yield f"{plan.where}.records: {len(records)} records, {more}"
        return
    span = f"{len(times)} planned times from {times[0]:.6g} to {times[-1]:.6g} s" if times else "no send"
    first: dict[int, int] = {}  # index into `times` -> the record that claimed it
    for i, record in enumerate(records):
        where = f"{plan.where}.records[{i}]"
        slot = _slot(times, record.planned_s)
        if slot is None:
            yield f"{where}.planned_s: {record.planned_s!r}, not a planned send of the {plan.name} ({span})"
            return
        if slot in first:
            again = f"repeats records[{first[slot]}]: each send goes once"
            yield f"{where}.planned_s: {record.planned_s!r} s {again}"
            return
        first[slot] = i
        prompt = spec.prompts[plan.prompts[slot] % len(spec.prompts)].id
        if record.prompt_id != prompt:
            carries = f"the send planned at {times[slot]!r} s carries {prompt!r}"
            yield f"{where}.prompt_id: {record.prompt_id!r}, {carries}"
            return
        late = list(_sent_in_time(where, record.started_s, times[slot], plan))
        if late:
            yield from late
            return


def _in_order(records: Sequence[RequestRecord], unsent: int, plan: _Plan) -> Iterator[str]:
    """Records of planned sends (`_planned` held) that are the first ones, the rest counted unsent."""
    times = plan.times
    sent = {_slot(times, r.planned_s) for r in records}
    skipped = next((k for k in range(len(records)) if k not in sent), None)
    if skipped is not None:
        yield (
            f"{plan.where}.records: no record of the send planned at {times[skipped]!r} s, yet later "
            "ones were sent (a client sends its planned times in order)"
        )
        return
    left = len(times) - len(records)
    if unsent != left:
        leaves = f"the {plan.name} leaves {left} of {len(times)} unsent"
        yield f"{plan.where}.unsent: the worker says {unsent}, {leaves}"


def _slot(times: Sequence[float], planned: float | None) -> int | None:
    """The index of the planned time nearest `planned`, if within `PLAN_TOL_S` of it, else None.

    The nearest, not the first within the tolerance: two planned times can fall within `PLAN_TOL_S` of
    each other (5,000 sends a second for 0.4 s: a gap under a nanosecond in about one run of a hundred),
    and each honest record echoes its own to the bit; the first in the tolerance gave the later one's
    record the earlier's send and refused an honest run for a send "repeated"."""
    if planned is None:
        return None
    at = bisect.bisect_left(times, planned)
    near = [i for i in (at - 1, at) if 0 <= i < len(times) and abs(times[i] - planned) <= PLAN_TOL_S]
    return min(near, key=lambda i: (abs(times[i] - planned), i)) if near else None


def _sent_in_time(where: str, started: float, planned: float, plan: _Plan) -> Iterator[str]:
    bound = f" less the client's clock bound {plan.bound:.6g} s" if plan.bound else ""
    if started < planned - plan.bound - EARLY_TOL_S:
        yield f"{where}.started_s: {started!r} s, before its planned {planned!r} s{bound}"
    elif plan.late is not None and started > planned + plan.bound + plan.late:
        yield (
            f"{where}.started_s: {started!r} s, after its planned {planned!r} s plus the client's clock "
            f"bound {plan.bound:.6g} s and {plan.late:g} s of slack"
        )


def in_flight_problems(
    records: Sequence[RequestRecord], slots: int, where: str = "generation.records"
) -> Iterator[str]:
    """A closed loop of `slots` keeps at most that many requests in flight: each slot sends its next
    request after its last one ended (`started_s` + `e2e_ms`; a retried request's first send, which
    `started_s` is, only lengthens it), so records that overlap more were never sent by it."""
    edges = sorted(
        [(r.started_s, 1) for r in records]
        + [(r.started_s + r.e2e_ms / 1e3 - OVERLAP_TOL_S, -1) for r in records]
    )  # at one instant an end comes before a start
    running = 0
    for at, step in edges:
        running += step
        if running > slots:
            more = f"more than the {slots} slots of its closed loop"
            yield f"{where}: {running} requests in flight at {at!r} s, {more}"
            return


def physics_problems(m: Measurement) -> Iterator[str]:
    """Every load's successful records held to physics (the module's docstring), the first one that
    breaks it named with its field."""
    loads = [("generation", m.generation)] if m.generation is not None else []
    if m.capacity is not None:
        loads += [(f"capacity.levels[{i}].generation", v.generation) for i, v in enumerate(m.capacity.levels)]
    for where, stats in loads:
        floor = (stats.rtt_ms or 0.0) * RTT_SHARE - RTT_SLACK_MS
        for i, r in enumerate(stats.records):
            problem = _unphysical(r, floor)
            if problem is not None:
                yield f"{where}.records[{i}].{problem}"
                return


def _unphysical(r: RequestRecord, floor_ms: float) -> str | None:
    if r.error is not None:
        return None
    if r.e2e_ms <= 0:
        return f"e2e_ms: {r.e2e_ms!r} ms, a request that succeeded in no time"
    if r.ttft_ms is None:
        return None
    if r.ttft_ms <= 0:
        return f"ttft_ms: {r.ttft_ms!r} ms, a first token in no time"
    if r.e2e_ms < r.ttft_ms:
        return f"e2e_ms: {r.e2e_ms!r} ms, before its first token at {r.ttft_ms!r} ms"
    if r.ttft_ms < floor_ms:
        trip = f"{floor_ms:.6g} ms (half the {(floor_ms + RTT_SLACK_MS) / RTT_SHARE:.6g} ms round trip"
        return f"ttft_ms: {r.ttft_ms!r} ms, quicker than {trip} its worker measured to the server, less 1 ms)"
    return None


def slots_problems(
    records: Sequence[RequestRecord],
    slots: int,
    span_s: float,
    where: str = "generation.records",
    *,
    floor_ms: float = 0.0,
) -> Iterator[str]:
    """A closed loop of `slots` whose requests start within `span_s` sends at most slots x (span /
    its shortest E2E + 1) requests: each slot's one after another, each at least the successful
    records' shortest E2E apart, and never quicker than the server's floor this submitter measured
    (`floor_ms`, `serverfloor`: the records' shortest is the worker's choice, the floor is not), and
    the last may start at the span's end and run past it (a slow server's one request of 39 s in a
    21 s run is one request, not a lie)."""
    own = min((r.e2e_ms for r in records if r.error is None and r.e2e_ms > 0), default=None)
    if own is None:
        return
    shortest = max(own, floor_ms)
    most = slots * (math.floor(span_s * 1e3 / shortest) + 1)
    if len(records) > most:
        at = "the server's floor" if floor_ms > own else "its shortest E2E"
        over = f"{span_s:.6g} s at {at} of {shortest!r} ms"
        yield f"{where}: {len(records)} records, more than its {slots} slots send in {over} ({most:.0f})"


def session_problems(records: Sequence[RequestRecord], spec: GenerateSpec) -> Iterator[str]:
    """Each session's turns in order, each after the last one's answer and the think time (the
    module's docstring); records of a load without sessions carry no session or turn."""
    if not spec.sessions():
        for i, r in enumerate(records):
            if r.session is not None or r.turn is not None:
                asked = "but the job asked no sessions"
                yield f"{_RECORDS}[{i}].turn: {r.turn!r} (session {r.session!r}), {asked}"
                return
        return
    seen: dict[tuple[int, int], int] = {}
    yield from _first(_turns_named(records, spec, seen), _turns_in_order(records, spec, seen))


_RECORDS: Final = "generation.records"


def _turns_named(
    records: Sequence[RequestRecord], spec: GenerateSpec, seen: dict[tuple[int, int], int]
) -> Iterator[str]:
    """Every record a session's turn, once, within its conversation's turns (fills `seen`)."""
    turns = {p.id: p.turns() for p in spec.prompts}
    for i, r in enumerate(records):
        if r.session is None or r.turn is None:
            yield f"{_RECORDS}[{i}]: no session or turn, yet the job replays sessions"
            return
        if (r.session, r.turn) in seen:
            again = f"repeats records[{seen[r.session, r.turn]}]"
            yield f"{_RECORDS}[{i}].turn: session {r.session} turn {r.turn} {again}"
            return
        if r.turn > turns.get(r.prompt_id, 1):
            asked = f"{r.prompt_id!r} has {turns.get(r.prompt_id, 1)} turns"
            yield f"{_RECORDS}[{i}].turn: {r.turn}, past its conversation's last ({asked})"
            return
        seen[r.session, r.turn] = i


def _turns_in_order(
    records: Sequence[RequestRecord], spec: GenerateSpec, seen: dict[tuple[int, int], int]
) -> Iterator[str]:
    """Each later turn after its session's previous turn succeeded, its answer and the think time."""
    for (session, turn), i in seen.items():
        if turn == 1:
            continue
        before = seen.get((session, turn - 1))
        r = records[i]
        if before is None or records[before].prompt_id != r.prompt_id or records[before].error is not None:
            why = "no successful turn before it in its session, with its prompt"
            yield f"{_RECORDS}[{i}].turn: session {session} turn {turn}, {why}"
            return
        prev = records[before]
        ended = prev.started_s + prev.e2e_ms / 1e3
        if r.started_s < ended + spec.think_time_s - OVERLAP_TOL_S:
            after = f"turn {turn - 1}'s last token at {ended!r} s plus {spec.think_time_s:g} s think"
            yield f"{_RECORDS}[{i}].started_s: {r.started_s!r} s, before {after}"
            return


def _concurrency_levels(m: Measurement, floor_ms: float = 0.0) -> Iterator[str]:
    """A concurrency search's levels, each a closed loop of its level's slots."""
    if m.capacity is None or m.capacity.by != "concurrency":
        return
    for i, level in enumerate(m.capacity.levels):
        where = f"capacity.levels[{i}].generation.records"
        records, slots = level.generation.records, int(level.level)
        span = level.generation.wall_s + LATE_SLACK_S
        yield from _first(
            in_flight_problems(records, slots, where),
            slots_problems(records, slots, span, where, floor_ms=floor_ms),
        )


def _closed_loop(
    records: Sequence[RequestRecord], deal: FleetDeal, spec: GenerateSpec, floor_ms: float
) -> Iterator[str]:
    limit = (spec.duration_s or 0.0) + (deal.offset_bound_s or 0.0) + LATE_SLACK_S
    for i, record in enumerate(records):
        if record.planned_s is not None:
            none = "but this member was dealt slots, no planned sends"
            yield f"generation.records[{i}].planned_s: {record.planned_s!r}, {none}"
            return
        if record.started_s > limit:
            yield (
                f"generation.records[{i}].started_s: {record.started_s!r} s, after the run's "
                f"{spec.duration_s or 0.0:g} s plus the clock bound and slack ({limit:.6g} s)"
            )
            return
    yield from _first(
        in_flight_problems(records, deal.slots),
        slots_problems(records, deal.slots, limit, floor_ms=floor_ms),
    )


__all__ = [
    "EARLY_TOL_S",
    "LATE_SLACK_S",
    "OVERLAP_TOL_S",
    "PLAN_TOL_S",
    "check_sends",
    "deal_problems",
    "draws_seed",
    "in_flight_problems",
    "open_loop_problems",
    "physics_problems",
    "rate_levels_problems",
    "session_problems",
    "slots_problems",
]
