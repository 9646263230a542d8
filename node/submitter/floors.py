"""Each fleet job's server measured by the submitter itself, once, before its members send: the floor.

`FloorBook` belongs to the campaign loop. At a fleet job's first offer it starts one probe of the
job's server from this submitter (`drivers.probe_floor`: its own TCP round trip and a few one-token
requests), cut at `FLOOR_PROBE_S`, inside the fleet's lead (`FLEET_LEAD_S`), so it is over before any
member sends and no member is offered the task while it runs on a quieter server than theirs; the
members' offers do not wait for it. Its figures become the job's `ServerFloor`
(`scheduler.verification.serverfloor`), which every member's result is judged against; a server
this submitter cannot reach (a gray-box server, a private address, a failure) gives no floor, said
in the `server_floor` event, and the members' records are then held to physics, their deal and
one another (`scheduler.results.fleetrows`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, final

import trio

import drivers
import scheduler as sch
from node.events import EventSink
from node.submitter.fleet import FLEET_LEAD_S
from protocol import GenerateSpec

log = logging.getLogger(__name__)

FLOOR_PROBE_S: Final = 3.0
"""The whole probe of one server: over a second before the fleet's start instant."""
assert FLOOR_PROBE_S <= FLEET_LEAD_S - 1.0

Probe = Callable[[GenerateSpec, str, str | None], Awaitable[drivers.ServerTiming]]


async def _probe(spec: GenerateSpec, url: str, api_key: str | None) -> drivers.ServerTiming:
    return await drivers.probe_floor(spec, url, api_key=api_key, timeout_s=FLOOR_PROBE_S)


@final
class FloorBook:
    """The floor of each fleet job's server, measured once at the job's first offer."""

    def __init__(self, campaign: sch.Campaign, keys: Mapping[str, str], probe: Probe = _probe) -> None:
        self._campaign = campaign
        self._keys = keys
        self._probe = probe
        self._started: set[int] = set()
        self._floors: dict[int, sch.ServerFloor] = {}

    def start(self, job_index: int, nursery: trio.Nursery, events: EventSink) -> None:
        """Probe the job's server in `nursery` if it is a fleet's with a URL and not probed yet."""
        spec = self._campaign.jobs[job_index].spec.generate
        if job_index in self._started or not sch.is_fleet(spec):
            return
        assert spec is not None
        endpoint = spec.endpoint
        if endpoint is None or endpoint.url is None:
            return
        self._started.add(job_index)
        key = self._keys.get(endpoint.api_key_env) if endpoint.api_key_env else None
        nursery.start_soon(self._measure, job_index, spec, endpoint.url, key, events)

    def floor(self, job_index: int) -> sch.ServerFloor | None:
        """The job's floor, or None (not a fleet, not measured yet, or the server not reached)."""
        return self._floors.get(job_index)

    async def _measure(
        self, job_index: int, spec: GenerateSpec, url: str, key: str | None, events: EventSink
    ) -> None:
        with trio.move_on_after(FLOOR_PROBE_S + 1.0):
            timing = await self._probe(spec, url, key)
            found = sch.server_floor(timing.ttft_ms, timing.rtt_ms)
            if found is not None:
                self._floors[job_index] = found
            events(
                "server_floor",
                job=job_index,
                floor_ms=None if found is None else round(found.floor_ms, 3),
                ttft_ms=[round(t, 3) for t in timing.ttft_ms],
                rtt_ms=timing.rtt_ms,
                error=timing.error,
            )
            log.info("server floor of job %d: %s", job_index, found.said if found else timing.error)


__all__ = ["FLOOR_PROBE_S", "FloorBook"]
