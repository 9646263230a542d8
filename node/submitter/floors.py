"""Each fleet's or closed loop's server measured by the submitter itself, once, before it is loaded.

`FloorBook` belongs to the campaign loop. At the first offer of a fleet job, or of a lone closed loop
for a set time (`concurrency` and `duration_s`, no search: the loads whose count only its slots bound),
it starts one probe of the job's server from this submitter (`drivers.probe_floor`: its own TCP round
trip and a few one-token requests), cut at `FLOOR_PROBE_S`. A fleet's runs inside the fleet's lead
(`FLEET_LEAD_S`), so it is over before any member sends, and the members' offers do not wait for it;
a lone closed loop's offers wait for it (`gates`, `measured`: at most `FLOOR_PROBE_S` and a second),
so the probe never shares the server with the load. Its figures become the job's `ServerFloor`
(`scheduler.verification.serverfloor`), which every member's result is judged against; a server
this submitter cannot reach (a gray-box server, a private address, a failure) gives no floor, said
in the `server_floor` event, and the records are then held to physics and their deal or slots, a
fleet's members to one another (`scheduler.results.fleetrows`). Its limit: the probe reads the URL as
this submitter resolves it, so a job whose URL names each worker's own machine (`localhost` on
workers elsewhere) is measured against another server.
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
    """The floor of each fleet's or timed closed loop's server, measured once at the job's first offer."""

    def __init__(self, campaign: sch.Campaign, keys: Mapping[str, str], probe: Probe = _probe) -> None:
        self._campaign = campaign
        self._keys = keys
        self._probe = probe
        self._started: dict[int, trio.Event] = {}
        self._floors: dict[int, sch.ServerFloor] = {}

    def wants(self, job_index: int) -> bool:
        """Whether the job's records are held to a floor: a fleet's, or a lone closed loop's for a set
        time (no search), against a URL of the campaign's."""
        spec = self._campaign.jobs[job_index].spec.generate
        if spec is None or spec.endpoint is None or spec.endpoint.url is None:
            return False
        closed = spec.request_rate is None and spec.capacity is None and spec.duration_s is not None
        return sch.is_fleet(spec) or closed

    def gates(self, job_index: int) -> bool:
        """Whether the job's offers wait for the probe (a lone closed loop's: it loads at once)."""
        return self.wants(job_index) and not sch.is_fleet(self._campaign.jobs[job_index].spec.generate)

    async def measured(self, job_index: int) -> None:
        """Until the job's probe is over (at most `FLOOR_PROBE_S` and a second)."""
        done = self._started.get(job_index)
        if done is not None:
            with trio.move_on_after(FLOOR_PROBE_S + 1.0):
                await done.wait()

    def start(self, job_index: int, nursery: trio.Nursery, events: EventSink) -> None:
        """Probe the job's server in `nursery` if the job `wants` a floor and was not probed yet."""
        if job_index in self._started or not self.wants(job_index):
            return
        spec = self._campaign.jobs[job_index].spec.generate
        assert spec is not None
        endpoint = spec.endpoint
        assert endpoint is not None
        assert endpoint.url is not None
        self._started[job_index] = trio.Event()
        key = self._keys.get(endpoint.api_key_env) if endpoint.api_key_env else None
        nursery.start_soon(self._measure, job_index, spec, endpoint.url, key, events)

    def floor(self, job_index: int) -> sch.ServerFloor | None:
        """The job's floor, or None (not a fleet, not measured yet, or the server not reached)."""
        return self._floors.get(job_index)

    async def _measure(
        self, job_index: int, spec: GenerateSpec, url: str, key: str | None, events: EventSink
    ) -> None:
        try:
            await self._probed(job_index, spec, url, key, events)
        finally:
            self._started[job_index].set()

    async def _probed(
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
