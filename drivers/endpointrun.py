"""One endpoint task as a `Measurement`: drive the server from this vantage point, then aggregate.

The worker calls `measure_endpoint` inside its own trio loop: the load is network I/O that the
client parses incrementally under its own caps (drivers.sse), with nothing loaded or run locally.
The measurement has no load or inference phase: its `inference_ms` is the requests' end-to-end
latency and `generation` holds every figure, with the round trip to the server (`rtt_ms`).
"""

from __future__ import annotations

from drivers.endpoint import EndpointOptions, drive_endpoint
from drivers.errors import DriverError
from protocol import Measurement, TaskSpec
from protocol.aggregate import NO_SAMPLES, derive
from protocol.genstats import summarize_generation


async def measure_endpoint(spec: TaskSpec, url: str, options: EndpointOptions) -> Measurement:
    """Run the task's generate workload against the server at `url` and aggregate it.

    Raises:
        DriverError: the task has no endpoint generate workload (a caller's bug).
    """
    generate = spec.generate
    if generate is None or generate.endpoint is None:
        raise DriverError("an endpoint measurement needs a generate spec with an endpoint")
    run = await drive_endpoint(generate, url, spec.timeout_s, options)
    stats = summarize_generation(run.records, run.wall_s, generate).with_(
        rtt_ms=run.rtt.connect_ms,
        tls_ms=run.rtt.tls_ms,
        client_overhead_ms=run.client_overhead_ms,
        client_cpu_pct=run.cpu_pct,
    )
    raw = Measurement(
        compute_unit=spec.compute_unit,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=0,
        inference_ms=NO_SAMPLES,
        peak_load_ram_mb=0.0,
        peak_inference_ram_mb=0.0,
        cpu_cores_used=0.0,
        generation=stats,
    )
    return derive(raw, spec)


__all__ = ["measure_endpoint"]
