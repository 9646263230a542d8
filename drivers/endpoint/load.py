"""Drive a model server with a generate workload from this vantage point.

Closed loop: `spec.concurrency` workers each send the next prompt when their last request ended.
Open loop: Poisson arrivals at `spec.request_rate` (exponential gaps from a seeded RNG: the seed the
submitter put in the offer, `spec.arrival_seed`, or the options', or one drawn here; it is returned)
whatever the server's state. Either runs through the prompts once, or cycles them for
`spec.duration_s`. The round trip to the server is measured first, on raw sockets. `run_endpoint`
is the synchronous entry the spawned child calls; it returns the raw records for the aggregator.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

import trio

from drivers.endpoint.budget import Budget
from drivers.endpoint.completion import Server, open_client
from drivers.endpoint.fleetload import start_instant
from drivers.endpoint.http1 import kernel_stamps
from drivers.endpoint.options import EndpointOptions
from drivers.endpoint.rtt import Rtt, measure_rtt
from drivers.endpoint.sender import Load, Schedule, closed, of_deal, open_at, send
from drivers.errors import DriverError
from protocol import GenerateSpec, RequestRecord
from protocol.generation import MAX_RECORDS


@dataclass(frozen=True)
class EndpointRun:
    """What one vantage point measured: the raw records and what the aggregator needs beside them.

    Attributes:
        records: one per request sent, in the order they ended.
        wall_s: from the first request sent to the last one ended.
        rtt: TCP handshake (and TLS handshake) medians from here to the server (`drivers.endpoint.rtt`).
        client_overhead_ms: median over requests of this client's own parse time per request.
        read_overhead_ms: median parse time of one read (chunk) of a stream.
        retries: 429 / 5xx retries over the run.
        seed: the open loop's seed, None for a closed loop.
        reasoning: each record's reasoning text (not kept in the record; a pinned tokenizer counts it).
        cpu_pct: this process's CPU time over the run's wall time, in % of one core.
        unsent: open loop: planned sends the run's deadline came before (never dropped silently).
        span_s: the schedule's own span (`drivers.endpoint.sender.Schedule`), for the achieved send rate.
    """

    records: tuple[RequestRecord, ...]
    wall_s: float
    rtt: Rtt
    client_overhead_ms: float | None
    read_overhead_ms: float | None
    retries: int
    seed: int | None
    reasoning: tuple[str, ...] = ()
    cpu_pct: float | None = None
    unsent: int = 0
    span_s: float | None = None


def completions_url(url: str, chat: bool) -> str:
    """The completions URL for a server URL given as its root, its `/v1` base, or the full path."""
    base = url.rstrip("/")
    if base.endswith(("/chat/completions", "/completions")):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + ("/chat/completions" if chat else "/completions")


def run_endpoint(
    spec: GenerateSpec, url: str, *, deadline_s: float, options: EndpointOptions | None = None
) -> EndpointRun:
    """Run the workload against the server at `url` and return what was measured (blocking).

    Raises:
        DriverError: the spec names no endpoint (a caller's bug, not a server fault).
    """
    return trio.run(drive_endpoint, spec, url, deadline_s, options or EndpointOptions())


async def drive_endpoint(
    spec: GenerateSpec, url: str, deadline_s: float, options: EndpointOptions
) -> EndpointRun:
    """The async body of `run_endpoint`, for callers already inside trio."""
    if spec.endpoint is None:
        raise DriverError("a generate spec without an endpoint cannot be run against a server")
    async with kernel_stamps():  # every read stamped where its bytes arrived, the first one's too
        return await _drive(spec, url, deadline_s, options)


async def _drive(spec: GenerateSpec, url: str, deadline_s: float, options: EndpointOptions) -> EndpointRun:
    assert spec.endpoint is not None
    deadline = trio.current_time() + deadline_s
    rtt = Rtt(None, None, 0, "the run's deadline passed before the round trip was measured")
    with trio.move_on_at(deadline):
        rtt = await measure_rtt(url, connect_ip=options.connect_ip, samples=options.rtt_samples)
    server = Server(
        completions_url(url, spec.chat), spec.endpoint.model, spec.endpoint.api_key, options.connect_ip
    )
    seed = None
    if spec.request_rate is not None and spec.deal is None:
        seed = spec.arrival_seed if spec.arrival_seed is not None else options.seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
    deal = spec.deal
    start = start_instant(deal) if deal is not None else trio.current_time()
    if spec.duration_s is not None:
        deadline = min(deadline, start + spec.duration_s + options.drain_s)
    cpu = time.process_time(), trio.current_time()
    async with open_client() as client:
        load = Load(spec, server, options, client, (deadline, start), budget=Budget(*options.budget))
        await send(load, _schedule(spec, seed, options))
    outcomes = load.outcomes
    wall_s = max((o.record.started_s + o.record.e2e_ms / 1e3 for o in outcomes), default=0.0)
    return EndpointRun(
        records=tuple(o.record for o in outcomes),
        wall_s=wall_s,
        rtt=rtt,
        client_overhead_ms=_median_ms([o.parse_total_ns for o in outcomes if o.parse_ns]),
        read_overhead_ms=_median_ms([ns for o in outcomes for ns in o.parse_ns]),
        retries=sum(o.retries for o in outcomes),
        seed=seed,
        reasoning=tuple(o.reasoning for o in outcomes),
        cpu_pct=_cpu_pct(cpu[0], max(cpu[1], start)),
        unsent=load.unsent,
        span_s=_schedule(spec, seed, options).span_s,
    )


def _schedule(spec: GenerateSpec, seed: int | None, options: EndpointOptions) -> Schedule:
    """A fleet member's deal, an open loop's planned sends from `seed`, or a closed loop."""
    if spec.deal is not None:
        return of_deal(spec.deal, spec.duration_s)
    if spec.request_rate is not None and seed is not None:
        return open_at(spec.request_rate, seed, spec, options.max_requests or MAX_RECORDS)
    return closed(spec.concurrency, spec.duration_s)


def _cpu_pct(cpu_s: float, wall: float) -> float | None:
    """This process's CPU time since `cpu_s` over the trio time since `wall` (a fleet member: since its
    start instant; the wait before it is idle), in % of one core."""
    elapsed = trio.current_time() - wall
    return max(0.0, time.process_time() - cpu_s) / elapsed * 100 if elapsed > 0 else None


def _median_ms(values_ns: list[int]) -> float | None:
    return statistics.median(values_ns) / 1e6 if values_ns else None


__all__ = ["EndpointOptions", "EndpointRun", "completions_url", "drive_endpoint", "run_endpoint"]
