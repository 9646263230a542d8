"""One endpoint task as a `Measurement`: drive the server from this vantage point, then aggregate.

The worker calls `measure_endpoint` inside its own trio loop: the load is network I/O that the
client parses incrementally under its own caps (drivers.endpoint.sse), with nothing loaded or run locally.
The measurement has no load or inference phase: its `inference_ms` is the requests' end-to-end
latency and `generation` holds every figure, with the round trip to the server (`rtt_ms`). With a
pinned tokenizer, each request's output is counted with it in a child (`drivers.endpoint.tokencount`). A
capacity search (`generate.capacity`) runs its levels (`drivers.endpoint.capacity`) and keeps them all in
`capacity`; `generation` is then the knee level's figures (its records stay in the level; their
tokens are as the stream counted them). A run whose every request failed is no measurement: it
fails `FailureReason.SERVER`, naming what the server answered and how many requests it received
(a capacity search too, when every request of every level failed), unless every one of them met the
client's own deadline: that is `FailureReason.TIMEOUT`, the wait named, never the server's failure
(a server answering one request at a time keeps the others waiting; it failed nothing).
Energy is the server's: read only when the owner declared the server runs on this device
(`EndpointOptions.energy_unit`, gray-box), else left out with a note that says so; a capacity
search reads none (its levels are not one window).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import trio

from drivers.endpoint.capacity import search_capacity
from drivers.endpoint.load import EndpointOptions, EndpointRun, drive_endpoint
from drivers.endpoint.tokencount import counted
from drivers.errors import DriverError, TaskFailed
from drivers.measuring.energy import EnergyMeter, offer_for
from protocol import EnergyReading, FailureReason, Measurement, RequestRecord, Stage, TaskSpec
from protocol.aggregate import derive
from protocol.capacity import headline
from protocol.genstats import summarize_generation

logger = logging.getLogger(__name__)


async def measure_endpoint(spec: TaskSpec, url: str, options: EndpointOptions) -> Measurement:
    """Run the task's generate workload against the server at `url` and aggregate it.

    Raises:
        DriverError: the task has no endpoint generate workload (a caller's bug).
    """
    generate = spec.generate
    if generate is None or generate.endpoint is None:
        raise DriverError("an endpoint measurement needs a generate spec with an endpoint")
    capacity = None
    if generate.capacity is not None:  # the knee level's figures head the row; every level is kept
        capacity = await search_capacity(generate, url, spec.timeout_s, options)
        failed = run_failure([r for level in capacity.levels for r in level.generation.records])
        if failed is not None:  # every level's every request failed: no knee to find
            raise failed
        stats = headline(capacity) or summarize_generation((), 0.0, generate)
        energy = EnergyReading(note=NOT_ONE_WINDOW)
    else:
        run, energy = await _metered(spec, url, options)
        records = run.records
        if generate.tokenizer is not None and generate.tokenizer.data:
            records, problem = await counted(records, run.reasoning, generate.tokenizer)
            if problem:
                logger.warning("token counts stay per chunk: %s", problem)
        failed = run_failure(records)
        if failed is not None:
            raise failed
        stats = summarize_generation(
            records, run.wall_s, generate, cpu_pct=run.cpu_pct, unsent=run.unsent
        ).with_(rtt_ms=run.rtt.connect_ms, tls_ms=run.rtt.tls_ms, client_overhead_ms=run.client_overhead_ms)
    raw = Measurement.nothing_timed(spec.compute_unit).with_(
        generation=stats, capacity=capacity, energy_readings=(energy,)
    )
    return derive(raw, spec)


def run_failure(records: Sequence[RequestRecord]) -> TaskFailed | None:
    """The task's failure when every request failed, None when one succeeded: `TIMEOUT` when each
    met the client's deadline (the wait is the client's: "all 2 requests passed the client's
    deadline: ..., the server received 2"), else `SERVER` naming what the server answered."""
    fault = server_fault(records)
    if fault is None:
        return None
    if all(r.error == "deadline" for r in records):
        waited = max(records, key=lambda r: r.e2e_ms)
        detail = (
            f"all {len(records)} requests passed the client's deadline (the task's timeout_s, or its "
            f"duration_s and drain), none failed by the server; the longest: {waited.error_detail}; "
            f"the server received {sum(r.attempts for r in records)}, retries included"
        )
        return TaskFailed(FailureReason.TIMEOUT, detail, Stage.RUN)
    return TaskFailed(FailureReason.SERVER, fault, Stage.RUN)


def server_fault(records: Sequence[RequestRecord]) -> str | None:
    """Why the run measured nothing when every request failed, naming what the server answered
    ("all 23 requests failed: HTTP 500 x23; the server received 92, retries included"); None when
    one succeeded (a partly failed run is a measurement: its row carries its error share)."""
    if not records or any(r.error is None for r in records):
        return None
    answers = Counter(f"HTTP {r.http_status}" if r.http_status else str(r.error) for r in records)
    named = ", ".join(f"{what} x{n}" for what, n in answers.most_common())
    sent = sum(r.attempts for r in records)
    return f"all {len(records)} requests failed: {named}; the server received {sent}, retries included"


NOT_ONE_WINDOW = "capacity search: its levels are not one measured window, so no energy is read"
NOT_OURS = (
    "endpoint: the energy is the server's and the worker did not declare that the server runs on "
    "this device, so none is read here"
)


async def _metered(spec: TaskSpec, url: str, options: EndpointOptions) -> tuple[EndpointRun, EnergyReading]:
    """The run, and the energy of this device over it when the server is declared to run here."""
    assert spec.generate is not None
    if options.energy_unit is None:
        return await drive_endpoint(spec.generate, url, spec.timeout_s, options), EnergyReading(note=NOT_OURS)
    meter = EnergyMeter(offer_for(options.energy_unit))
    await trio.to_thread.run_sync(meter.idle)
    with meter.measuring():
        run = await drive_endpoint(spec.generate, url, spec.timeout_s, options)
    reading = meter.reading()
    where = f"gray-box endpoint on this device ({options.energy_unit.value}): {reading.note}"
    return run, reading.with_(note=where[:500])


__all__ = ["measure_endpoint", "run_failure", "server_fault"]
