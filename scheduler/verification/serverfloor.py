"""A load's records held to a floor that the worker who sent them does not set: the submitter's own view.

The floor of a record (`floor_problems`) is what this submitter measured of the server itself, from its
own vantage point, before the job was dealt (`drivers.endpoint.floorprobe`): the shortest first token of
a few one-token requests less the round trip of that vantage point (its TCP handshake's), which
is the least the server took to answer anyone; the floor is `FLOOR_SHARE` of it. A successful record's
TTFT (its E2E where it has none) under the floor is refused naming the record, the member, its figure
and how the floor was found; a closed loop's count is bounded by its slots x (span / the floor + 1)
(`sendcheck.slots_problems`), a bound the records' own shortest can only tighten.

A busy submitter must not time the server late: the probe's reads are stamped by the kernel where
the bytes arrived, as the workers' are (`drivers.endpoint.floorprobe`); timed at the read, a loaded
submitter's probe made floors that refused honest records (a stub on loopback, a 20 ms server's fleet
beside the suite at load 4).

The cheater's view: a fleet member or a closed loop's worker sees its deal (slots, duration, or planned
sends), the server, and its own records, and chooses every figure it signs: each record's times and
lengths, its own round trip (`rtt_ms`), its count. The physics of `sendcheck` took the floor from
those choices (half the member's own round trip, below zero under 2 ms; the slot bound divided by
the records' own shortest E2E), so 4,900 records of 0.5 us at one instant merged as 5,015 requests
at TTFT 0.000 ms while the server saw 229. This floor reads none of them: the probe requests go from
the submitter's socket, before the worker is offered the task, and the worker sees neither them nor
their figures. What a member can still choose is its distance to the server, which only lengthens its
records; and the server's time, which a member closer to the server does not shorten (one round
trip is its own, the server's work is everyone's). What the floor does not catch: records at or
above it that were never sent (a closed loop padded with plausible requests up to its slot bound, at
most slots x duration / floor). The server's own count does, where the campaign names the server's
metrics (`endpoint.metrics_url`, `servercount`): no more requests or tokens than its counters rose by
between the submitter's reads; without it, such padding stands (measured on llama.cpp's server,
tests/labs/e2e/test_server_count.py: a padded loop's 26 requests of 4 tokens accepted while the
server generated 61 tokens, its 5 probe tokens included; with it, refused).

Lone open loops (`request_rate`, no search) are probed too: their count is their schedule's
(`sendcheck.open_loop_problems`), but each record's first token is the worker's word, held only by
its own round trip before. Capacity searches are not probed (their levels load at once and would
share the server with the probe); their records are held to physics and their levels' slots.

Where it has no floor, what holds the records: a gray-box server (each worker's own, unreachable
from here and different per member, so neither a floor nor a count is taken), an address this
submitter cannot reach. (A lease reclaimed after a restart keeps its job's floor and count: the
campaign store keeps them, `node.submitter.floors`.) Then
physics (the worker's own round trip), the schedule (a deal's planned sends, an open loop's seed,
a closed loop's slots x span / its own shortest E2E: the liar's choice), and, for a fleet, the
other members' figures (`scheduler.results.fleetrows.apart`: a member quicker than half the
others' lower median is kept out of the merged row). A gray-box closed loop's count is bounded by
no view of this submitter's own: it sees only the lease's timing (the offer and the result), which
bounds the run's length, not its requests. Where `verify:` asks replicas, the other replicas' counts
bound it: a timed closed loop's replicas agree on their pace too, slots x the task's duration over
the records (`agreement.pace_of`), so a loop padded under its median (as many records of half a
microsecond as real ones: its count doubled, its median one of its real records) is an outlier
(tests/labs/e2e/test_padded_gray_loop.py). Without replicas such a count is the worker's word, as its
row's `single` says.

`FLOOR_SHARE` is one half: a prompt cache or a quieter server can answer a member quicker than the
probe's quickest of five, but not twice as quick; a record at half the server's least time is one
the server did not answer. Measured on a real server (`examples/serve_llm.py`, SmolLM2-135M under
`transformers serve` on two loaded cores, 2026-11-26): the probe's first tokens 539-685 ms, a floor of
269 ms; an honest closed loop of 2 slots for 20 s beside it, 11 requests, its quickest first token
837 ms (3.1 x the floor), none under it. Refuted by the weather (2026-11-27, ca4bfb4, the suite beside
`kit.load 4` and a lab's own load 8, load average 13): llama.cpp's server in a test's process answered
the probe's quickest first token in about 106 ms, a floor of 52.69 ms, and an honest fleet member's
record a few seconds later in 35.96 ms, refused `invalid` (tests/labs/e2e/test_server_count.py). A
floor from one moment's five probes is a false positive when that moment was the busy one. So the
floor a result is judged by is the least of the job's probes (`lower_floor`): a result with a record
under it has the server probed again at its arrival (`node.submitter.floors.FloorBook.again`), and
the share is of the server's quickest at either moment. Tested with the moment set by the test (a
stub answering the job's first probe in 200 ms and the load in 50 ms, tests/labs/e2e/
test_fleet_floor.py): the first floor, 99.8 ms, refused both honest members (the code before);
lowered by the probe at the first result, 24.5 ms, it accepts them and refuses the liar. What it
does not hold: a server quicker during the load than at both probes by more than twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from protocol import Measurement, RequestRecord

FLOOR_SHARE: Final = 0.5
"""A successful record's first token takes at least this share of the server's least answer time."""
PROBE_ALLOWANCE_MS: Final = 1.0
"""Taken off the probe's shortest first token before the share: under a millisecond, what a client
reads is mostly its own work and the host's, not the server's, and the shortest of five probes is no
measure of the shortest of a worker's thousands (a stub on loopback: a probe's 0.22 ms against an
honest record's 0.087 ms, both kernel-stamped). A server that answers in under a millisecond gets no
floor; a 50 ms one a floor of 24.5 ms instead of 25."""


@dataclass(frozen=True)
class ServerFloor:
    """The least time a record of this server may take, and how the submitter found it.

    Attributes:
        floor_ms: no successful record's TTFT (E2E without one) is under this.
        said: how it was measured, for a refusal ("half the shortest first token of ...").
    """

    floor_ms: float
    said: str


def server_floor(
    ttft_ms: Sequence[float], rtt_ms: float | None, when: str = "before the job"
) -> ServerFloor | None:
    """The floor from the submitter's own probe: `FLOOR_SHARE` x (the shortest first token less
    `PROBE_ALLOWANCE_MS` and the probe's round trip); None without a successful probe request or when
    nothing is left. `when` says the probe's moment in the floor's `said`."""
    if not ttft_ms:
        return None
    shortest, trip = min(ttft_ms), rtt_ms or 0.0
    floor = FLOOR_SHARE * (shortest - PROBE_ALLOWANCE_MS - trip)
    if floor <= 0:
        return None
    said = (
        f"{FLOOR_SHARE:g} x the shortest first token of {shortest:.4g} ms less {PROBE_ALLOWANCE_MS:g} ms "
        f"for the clients' own work and the {trip:.3g} ms round trip, "
        f"which this submitter measured to the server itself in {len(ttft_ms)} requests {when}"
    )
    return ServerFloor(floor, said)


def lower_floor(
    floor: ServerFloor, ttft_ms: Sequence[float], rtt_ms: float | None, probes: int
) -> ServerFloor | None:
    """The least of `floor` and the floor of a later probe (`ttft_ms`, `rtt_ms`), the `probes`-th of
    the job, taken at a result's arrival: a probe that answered nothing leaves `floor` as it was (it
    learned nothing of the server); one whose quickest leaves nothing of the server's own time leaves
    no floor (None); a quicker one lowers it, and its `said` names both moments. Never raises a floor:
    a probe at a busier moment than the first says only that the server was busy then."""
    if not ttft_ms:
        return floor
    found = server_floor(ttft_ms, rtt_ms, "at a result's arrival")
    if found is None:
        return None
    if found.floor_ms >= floor.floor_ms:
        return floor
    said = f"{found.said}; the least of the job's {probes} probes (the floor before: {floor.floor_ms:.4g} ms)"
    return ServerFloor(found.floor_ms, said)


def floor_problems(m: Measurement, floor: ServerFloor | None, who: str = "") -> Iterator[str]:
    """Every load's successful records held to `floor`, the first one under it named with its field;
    `who` names the member in the refusal ("fleet member 2 of 3")."""
    if floor is None:
        return
    loads = [("generation", m.generation)] if m.generation is not None else []
    if m.capacity is not None:
        loads += [(f"capacity.levels[{i}].generation", v.generation) for i, v in enumerate(m.capacity.levels)]
    for where, stats in loads:
        for i, r in enumerate(stats.records):
            problem = _under(r, floor)
            if problem is not None:
                by = f" ({who})" if who else ""
                yield f"{where}.records[{i}].{problem}{by}"
                return


def _under(r: RequestRecord, floor: ServerFloor) -> str | None:
    if r.error is not None:
        return None
    field, value = ("ttft_ms", r.ttft_ms) if r.ttft_ms is not None else ("e2e_ms", r.e2e_ms)
    if value >= floor.floor_ms:
        return None
    return f"{field}: {value!r} ms, under the server's floor of {floor.floor_ms:.4g} ms ({floor.said})"


__all__ = [
    "FLOOR_SHARE",
    "PROBE_ALLOWANCE_MS",
    "ServerFloor",
    "floor_problems",
    "lower_floor",
    "server_floor",
]
