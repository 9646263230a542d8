"""Each fleet's or lone loop's server measured by the submitter itself, once, before it is loaded.

`FloorBook` belongs to the campaign loop. At the first offer of a fleet job, of a lone closed loop
for a set time (`concurrency` and `duration_s`, no search: the loads whose count only its slots bound),
or of a lone open loop (`request_rate`, no search: its count is its schedule's, but each record's
first token is the worker's word), it starts one probe of the job's server from this submitter
(`drivers.probe_floor`: its own TCP round trip and a few one-token requests), cut at `FLOOR_PROBE_S`.
A fleet's runs inside the fleet's lead (`FLEET_LEAD_S`), so it is over before any member sends, and
the members' offers do not wait for it; a lone loop's offers wait for it (`gates`, `measured`: at
most `METRICS_READ_S`, `FLOOR_PROBE_S` and a second), so the probe never shares the server with the
load. Its figures become the job's `ServerFloor` (`scheduler.verification.serverfloor`), which every
member's result is judged against; a server this submitter cannot reach (a gray-box server, a
private address, a failure) gives no floor, said in the `server_floor` event, and the records are
then held to physics and their deal or slots, a fleet's members to one another
(`scheduler.results.fleetrows`). Its limit: the probe reads the URL as this submitter resolves it,
so a job whose URL names each worker's own machine (`localhost` on workers elsewhere) is measured
against another server.

A floor taken at one moment is the server at that moment: a probe that met a busy server (its machine
loaded by others, a batch in flight) makes a floor that a quicker moment's honest records go under
(llama.cpp's server beside the suite at load 13: a probe's quickest first token 106 ms, an honest
member's record 36 ms a few seconds later, refused). So a result with a record under the job's floor
is not judged at once: `again` probes the server once more, at the result's arrival (its loads are
over then; a fleet's other members end at the same instant), and the job's floor becomes the least
of its probes (`scheduler.verification.lower_floor`): a record the server answered quicker than any
probe it took, by more than `FLOOR_SHARE`, is still refused; one that a quieter moment explains is
not. A probe at a busier moment never raises the floor, and one that answered nothing leaves it.
The cheater's view: a member sees its own records and chooses them; it does not see the probes nor
their figures, and it cannot make the server answer this submitter quicker than it can, so the most a
liar gains is the server's own quickest moment, which an honest record can reach too. Results with no
record under the floor cost no probe.

Where the job's endpoint names the server's metrics (`metrics_url`), the same task first reads the
server's counters (`drivers.read_metrics`, before the probe, so the probe's requests fall inside the
rise), and `count` reads them again when a result arrives (the loop awaits it before judging): the
rise is the `ServerCount` the result is held to (`scheduler.verification.servercount`), each fleet
member with the claims of those accepted before it (`accepted`) and the requests of this submitter's
own later probes (`own`: taken before the counters are read, so each one counted was sent before).
A read that fails, a page without a known counter, or a counter that fell gives no count: the job
goes on with the floor alone, and the `server_count` event and a warning on the submitter's log say
why (the rows do not carry it).

What a job's probe found (its floor, the counters' read before it) and the claims of the job's results
accepted since are kept in the campaign store as they change (`keep`, `CampaignStore.put_floorbook`), and
a resumed campaign's book starts from them (`restore`): a lease reclaimed after a submitter restart is
judged against the floor and the count of the job's own start, and the job is not probed again while
its loads run (a probe then would share the server with them, and a read of the counters then would
leave out what they had already sent, refusing honest results).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, final, get_args

import trio

import drivers
import scheduler as sch
from node.events import EventSink
from node.submitter.fleet import FLEET_LEAD_S
from protocol import GenerateSpec, Measurement
from scheduler.verification.servercount import Quantity

log = logging.getLogger(__name__)

FLOOR_PROBE_S: Final = 3.0
"""The whole probe of one server: over a second before the fleet's start instant."""
METRICS_READ_S: Final = 1.0
"""The read of the server's counters before the probe: a page on a reachable server comes in milliseconds."""
assert METRICS_READ_S + FLOOR_PROBE_S <= FLEET_LEAD_S - 1.0

Probe = Callable[[GenerateSpec, str, str | None], Awaitable[drivers.ServerTiming]]
Read = Callable[[str], Awaitable[drivers.MetricsPage]]
QUANTITIES: Final[tuple[Quantity, ...]] = get_args(Quantity)
Keep = Callable[[int, str], None]
"""Keeps a job's state (its index, the state as JSON) where a resumed campaign reads it back."""


async def _probe(spec: GenerateSpec, url: str, api_key: str | None) -> drivers.ServerTiming:
    return await drivers.probe_floor(spec, url, api_key=api_key, timeout_s=FLOOR_PROBE_S)


async def _read(url: str) -> drivers.MetricsPage:
    return await drivers.read_metrics(url, timeout_s=METRICS_READ_S)


def _parsed(page: drivers.MetricsPage) -> sch.CountRead:
    return sch.CountRead(error=page.error) if page.error else sch.parse_counters(page.body)


@final
class FloorBook:
    """The floor of each fleet's or timed closed loop's server, measured once at the job's first offer."""

    def __init__(
        self,
        campaign: sch.Campaign,
        keys: Mapping[str, str],
        probe: Probe = _probe,
        read: Read = _read,
        keep: Keep | None = None,
    ) -> None:
        self._campaign = campaign
        self._keys = keys
        self._probe = probe
        self._read = read
        self._keep = keep
        self._started: dict[int, trio.Event] = {}
        self._floors: dict[int, sch.ServerFloor] = {}
        self._before: dict[int, sch.CountRead] = {}
        self._accepted: dict[int, sch.Claimed] = {}
        self._own: dict[int, sch.Claimed] = {}
        self._probes: dict[int, int] = {}
        self._again: dict[int, trio.Lock] = {}

    def wants(self, job_index: int) -> bool:
        """Whether the job's records are held to a floor: a fleet's, a lone closed loop's for a set
        time, or a lone open loop's (no search), against a URL of the campaign's."""
        spec = self._campaign.jobs[job_index].spec.generate
        if spec is None or spec.endpoint is None or spec.endpoint.url is None or spec.capacity is not None:
            return False
        closed = spec.request_rate is None and spec.duration_s is not None
        return sch.is_fleet(spec) or closed or spec.request_rate is not None

    def counts(self, job_index: int) -> bool:
        """Whether the job's results are held to the server's count: it `wants` a floor and its
        endpoint names the server's metrics."""
        spec = self._campaign.jobs[job_index].spec.generate
        return (
            self.wants(job_index)
            and spec is not None
            and spec.endpoint is not None
            and (spec.endpoint.metrics_url is not None)
        )

    async def count(self, job_index: int, events: EventSink) -> sch.ServerCount | None:
        """The server's counters read again now, less the read before the job: None where either read
        gave nothing (said in a `server_count` event)."""
        spec = self._campaign.jobs[job_index].spec.generate
        before = self._before.get(job_index)
        if before is None or spec is None or spec.endpoint is None or spec.endpoint.metrics_url is None:
            return None
        url = spec.endpoint.metrics_url
        after = _parsed(await self._read(url))
        rise = sch.count_rise(before, after, url)
        if isinstance(rise, str):
            events("server_count", job=job_index, read="after", error=rise)
            log.warning("server count of job %d not read: %s", job_index, rise)
            return None
        events("server_count", job=job_index, read="after", rises=dict(rise.rises))
        return rise

    def accepted(self, job_index: int, claims: sch.Claimed) -> None:
        """A counted job's result was accepted with these claims: its next results are held with them."""
        self._accepted[job_index] = self._accepted.get(job_index, sch.Claimed()) + claims
        self._kept(job_index)

    def restore(self, kept: Mapping[int, str]) -> None:
        """Start from what a campaign's earlier run kept (job index -> its state as `keep` was given
        it): each kept job counts as probed, with the floor, the read before and the claims it had. A
        state this code cannot read is left out (that job is then judged as it would be unprobed)."""
        for job_index, text in kept.items():
            if not 0 <= job_index < len(self._campaign.jobs):
                continue
            try:
                state = json.loads(text)
                floor = state["floor"]
                before = state["before"]
                accepted = sch.Claimed(*(int(n) for n in state["accepted"]))
                own = sch.Claimed(*(int(n) for n in state.get("own", (0, 0, 0))))
                probes = int(state.get("probes", 1))
                if floor is not None:
                    self._floors[job_index] = sch.ServerFloor(float(floor[0]), str(floor[1]))
                if before is not None:
                    values = {q: (float(v), str(name)) for q, (v, name) in before.items() if q in QUANTITIES}
                    self._before[job_index] = sch.CountRead(values)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("server floor of job %d not restored: %s", job_index, exc)
                continue
            self._accepted[job_index] = accepted
            self._own[job_index] = own
            self._probes[job_index] = probes
            done = trio.Event()
            done.set()
            self._started[job_index] = done

    def _kept(self, job_index: int) -> None:
        """Hand the job's state to `keep` (a resumed campaign's `restore` reads it)."""
        if self._keep is None:
            return
        floor = self._floors.get(job_index)
        before = self._before.get(job_index)
        claims = self._accepted.get(job_index, sch.Claimed())
        state = {
            "floor": None if floor is None else [floor.floor_ms, floor.said],
            "before": None if before is None else {q: [v, name] for q, (v, name) in before.values.items()},
            "accepted": [claims.requests, claims.generation_tokens, claims.prompt_tokens],
            "own": list(dataclasses.astuple(self.own(job_index))),
            "probes": self._probes.get(job_index, 0),
        }
        self._keep(job_index, json.dumps(state))

    def accepted_before(self, job_index: int) -> sch.Claimed:
        """The claims of the job's results accepted so far."""
        return self._accepted.get(job_index, sch.Claimed())

    def own(self, job_index: int) -> sch.Claimed:
        """The requests and tokens of this submitter's probes of the job's server taken after its
        counters' first read (`again`) and finished: they are in every later read's rise."""
        return self._own.get(job_index, sch.Claimed())

    async def again(self, job_index: int, m: Measurement, events: EventSink) -> None:
        """Where a record of `m` is under the job's floor, probe the server once more now and take the
        least of the job's probes as its floor (module docstring). One probe at a time a job: a result
        that waited for another's is looked at again against the floor that probe left."""
        lock = self._again.setdefault(job_index, trio.Lock())
        async with lock:
            floor = self._floors.get(job_index)
            if floor is None or next(sch.floor_problems(m, floor), None) is None:
                return
            timing = drivers.ServerTiming((), None, f"no answer within {FLOOR_PROBE_S + 1.0:g} s")
            with trio.move_on_after(FLOOR_PROBE_S + 1.0):
                timing = await self._probe(*self._target(job_index))
            self._probes[job_index] = self._probes.get(job_index, 1) + 1
            if self.counts(job_index):
                probed = sch.Claimed(len(timing.ttft_ms), timing.generated, 0)
                self._own[job_index] = self.own(job_index) + probed
            lowered = sch.lower_floor(floor, timing.ttft_ms, timing.rtt_ms, self._probes[job_index])
            if lowered is None:
                del self._floors[job_index]
            else:
                self._floors[job_index] = lowered
            self._kept(job_index)
            _said(events, job_index, "again", lowered, timing)
            log.info(
                "server floor of job %d probed again for a record under %.4g ms: %s",
                job_index, floor.floor_ms, lowered.said if lowered else timing.error or "no floor left",
            )  # fmt: skip

    def _target(self, job_index: int) -> tuple[GenerateSpec, str, str | None]:
        """The job's load, its server's URL and the key its endpoint names, for a probe."""
        spec = self._campaign.jobs[job_index].spec.generate
        assert spec is not None
        endpoint = spec.endpoint
        assert endpoint is not None
        assert endpoint.url is not None
        key = self._keys.get(endpoint.api_key_env) if endpoint.api_key_env else None
        return spec, endpoint.url, key

    def gates(self, job_index: int) -> bool:
        """Whether the job's offers wait for the probe (a lone loop's: it loads at once)."""
        return self.wants(job_index) and not sch.is_fleet(self._campaign.jobs[job_index].spec.generate)

    async def measured(self, job_index: int) -> None:
        """Until the job's probe is over (at most `METRICS_READ_S`, `FLOOR_PROBE_S` and a second)."""
        done = self._started.get(job_index)
        if done is not None:
            with trio.move_on_after(METRICS_READ_S + FLOOR_PROBE_S + 1.0):
                await done.wait()

    def start(self, job_index: int, nursery: trio.Nursery, events: EventSink) -> None:
        """Probe the job's server in `nursery` if the job `wants` a floor and was not probed yet."""
        if job_index in self._started or not self.wants(job_index):
            return
        self._started[job_index] = trio.Event()
        nursery.start_soon(self._measure, job_index, *self._target(job_index), events)

    def floor(self, job_index: int) -> sch.ServerFloor | None:
        """The job's floor, or None (not a fleet, not measured yet, or the server not reached)."""
        return self._floors.get(job_index)

    async def _measure(
        self, job_index: int, spec: GenerateSpec, url: str, key: str | None, events: EventSink
    ) -> None:
        try:
            await self._probed(job_index, spec, url, key, events)
            self._kept(job_index)  # a probe cut by the submitter's stop is not kept: a resume probes again
        finally:
            self._started[job_index].set()

    async def _probed(
        self, job_index: int, spec: GenerateSpec, url: str, key: str | None, events: EventSink
    ) -> None:
        metrics = spec.endpoint.metrics_url if spec.endpoint is not None else None
        if metrics is not None:  # before the probe: its requests fall inside the rise
            before = sch.CountRead(error=f"GET {metrics}: no answer within {METRICS_READ_S:g} s")
            with trio.move_on_after(METRICS_READ_S + 0.1):
                before = _parsed(await self._read(metrics))
            counted = {quantity: value for quantity, (value, _) in before.values.items()}
            events("server_count", job=job_index, read="before", error=before.error or None, values=counted)
            if before.error:
                log.warning("server count of job %d not read: %s", job_index, before.error)
            else:
                self._before[job_index] = before
        with trio.move_on_after(FLOOR_PROBE_S + 1.0):
            timing = await self._probe(spec, url, key)
            found = sch.server_floor(timing.ttft_ms, timing.rtt_ms)
            if found is not None:
                self._floors[job_index] = found
            self._probes[job_index] = 1
            _said(events, job_index, "before", found, timing)
            log.info("server floor of job %d: %s", job_index, found.said if found else timing.error)


def _said(
    events: EventSink, job_index: int, read: str, floor: sch.ServerFloor | None, timing: drivers.ServerTiming
) -> None:
    """The `server_floor` event of a probe: `read` "before" the job or "again" at a result's arrival,
    the job's floor after it (None: no floor), and what the probe measured."""
    events(
        "server_floor",
        job=job_index,
        read=read,
        floor_ms=None if floor is None else round(floor.floor_ms, 3),
        ttft_ms=[round(t, 3) for t in timing.ttft_ms],
        rtt_ms=timing.rtt_ms,
        error=timing.error,
    )


__all__ = ["FLOOR_PROBE_S", "METRICS_READ_S", "FloorBook"]
