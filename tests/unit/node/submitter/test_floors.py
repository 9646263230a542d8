"""Issue 50: which jobs the submitter measures the server of (a fleet's, a timed closed loop's, a lone open
loop's), once a job, whose offers wait for it (a lone loop's), what a probe that answered or failed
leaves, the server's count read before the job and again for each result where the job names it, and
the server probed again for a result with a record under its floor."""

from __future__ import annotations

import json
from typing import Any

import trio
from kit.loads import load_measurement

import scheduler as sch
from drivers import MetricsPage, ServerTiming
from node.submitter.attempt import with_key
from node.submitter.floors import FloorBook, Probe, Read
from protocol import GenerateSpec, Measurement, RequestRecord
from protocol.genstats import summarize_generation
from scheduler.verification.serverfloor import PROBE_ALLOWANCE_MS

URL = "http://127.0.0.1:1/v1"
LOAD = {"prompts": "builtin:summaries", "max_new_tokens": 4}
JOBS = [
    {
        "endpoint": {"url": URL, "model": "m"},
        "generate": {**LOAD, "concurrency": 2, "duration_s": 5},
        "fleet": 2,
    },
    {"endpoint": {"url": URL, "model": "m"}, "generate": {**LOAD, "concurrency": 2, "duration_s": 5}},
    {"endpoint": {"url": URL, "model": "m"}, "generate": {**LOAD, "request_rate": 4, "duration_s": 5}},
    {"endpoint": {"url": URL, "model": "m"}, "generate": {**LOAD, "concurrency": 2}},
    {"endpoint": {"model": "m"}, "generate": {**LOAD, "concurrency": 2, "duration_s": 5}},
]
CAMPAIGN = sch.parse_campaign(json.dumps({"name": "floors", "jobs": JOBS}))


def test_a_fleet_and_timed_lone_loops_are_measured_and_only_the_lone_ones_wait() -> None:
    book = FloorBook(CAMPAIGN, {})
    assert [book.wants(i) for i in range(len(JOBS))] == [True, True, True, False, False]
    # a count-sized loop is held to its count, a gray-box server is the workers' own: neither is probed;
    # an open loop's count is its schedule's, but its first tokens are the worker's word: it is
    assert [book.gates(i) for i in range(len(JOBS))] == [False, True, True, False, False]
    assert not any(book.counts(i) for i in range(len(JOBS)))  # no job names the server's metrics


async def test_one_probe_a_job_and_its_floor_or_why_none() -> None:
    calls: list[str] = []
    events: list[tuple[str, dict[str, Any]]] = []

    async def probe(spec: GenerateSpec, url: str, key: str | None) -> ServerTiming:
        calls.append(url)
        await trio.lowlevel.checkpoint()
        if spec.fleet_size is not None:  # the fleet's server answers, the closed loop's does not
            return ServerTiming((60.0, 50.4, 55.0), 0.4)
        return ServerTiming((), None, "connect: cannot connect")

    book = FloorBook(CAMPAIGN, {}, probe)
    async with trio.open_nursery() as nursery:
        for job in (0, 0, 1, 2):
            book.start(job, nursery, lambda name, **fields: events.append((name, fields)))
        await book.measured(1)  # a lone closed loop's offer waits for this
    assert calls == [URL, URL, URL]  # one probe a job
    floor = book.floor(0)
    assert floor is not None
    assert floor.floor_ms == 0.5 * (50.4 - PROBE_ALLOWANCE_MS - 0.4)
    assert book.floor(1) is None  # the server did not answer: physics and the slots only
    said = sorted((f["job"], name, f["floor_ms"], f["error"]) for name, f in events)
    assert said == [
        (0, "server_floor", 24.5, ""),
        (1, "server_floor", None, "connect: cannot connect"),
        (2, "server_floor", None, "connect: cannot connect"),
    ]


LLAMA_BEFORE = b"""# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 100
"""
COUNTED = sch.parse_campaign(
    json.dumps(
        {
            "name": "counted",
            "jobs": [
                {
                    "endpoint": {"url": URL, "model": "m", "metrics_url": "http://127.0.0.1:1/metrics"},
                    "generate": {**LOAD, "concurrency": 2, "duration_s": 5},
                }
            ],
        }
    )
)


def _server(pages: list[bytes], calls: list[str]) -> tuple[Probe, Read]:
    """A server that answers the probe in 50 ms and gives `pages` as its metrics, one a read, each call
    noted in `calls` in order."""

    async def probe(spec: GenerateSpec, url: str, key: str | None) -> ServerTiming:
        calls.append("probe")
        return ServerTiming((50.0,), 0.4)

    async def read(url: str) -> MetricsPage:
        calls.append("read")
        return MetricsPage(pages.pop(0))

    return probe, read


async def test_the_servers_count_is_read_before_the_probe_and_again_for_each_result() -> None:
    order: list[str] = []
    pages = [LLAMA_BEFORE, LLAMA_BEFORE.replace(b" 100", b" 140"), LLAMA_BEFORE.replace(b" 100", b" 90")]
    events: list[tuple[str, dict[str, Any]]] = []
    book = FloorBook(COUNTED, {}, *_server(pages, order))
    assert book.counts(0)
    assert book.gates(0)
    emit = lambda name, **fields: events.append((name, fields))  # noqa: E731
    async with trio.open_nursery() as nursery:
        book.start(0, nursery, emit)
        await book.measured(0)
    assert order == ["read", "probe"]  # the probe's requests fall inside the rise
    count = await book.count(0, emit)
    assert count is not None
    assert count.rises == {"generation_tokens": 40.0}
    assert count.names == {"generation_tokens": "llamacpp:tokens_predicted_total"}
    assert await book.count(0, emit) is None  # the counter fell: the server restarted, nothing is read
    assert events[-1] == (
        "server_count",
        {"job": 0, "read": "after", "error": (
            "llamacpp:tokens_predicted_total fell from 100 to 90 between the reads (the server restarted)"
        )},
    )  # fmt: skip
    book.accepted(0, sch.Claimed(3, 12, 30))
    book.accepted(0, sch.Claimed(1, 4, 10))
    assert book.accepted_before(0) == sch.Claimed(4, 16, 40)


async def test_a_resumed_campaign_starts_from_the_floor_and_the_count_its_job_began_with() -> None:
    """What a job's probe found and the claims accepted since are kept as they change; the book of a
    resumed campaign starts from them: the job is not probed again while its loads run (its offers do
    not wait), and a reclaimed lease's result is held to the rise since the job's own start, with
    the claims accepted before the restart. A state it cannot read leaves that job unprobed."""
    kept: dict[int, str] = {}
    calls: list[str] = []
    probe, read = _server([LLAMA_BEFORE, LLAMA_BEFORE.replace(b" 100", b" 160")], calls)

    def emit(name: str, **fields: Any) -> None:
        pass

    book = FloorBook(COUNTED, {}, probe, read, keep=kept.__setitem__)
    async with trio.open_nursery() as nursery:
        book.start(0, nursery, emit)
        await book.measured(0)
    book.accepted(0, sch.Claimed(3, 12, 30))
    assert list(kept) == [0]

    resumed = FloorBook(COUNTED, {}, probe, read, keep=kept.__setitem__)
    resumed.restore(kept)
    async with trio.open_nursery() as nursery:
        resumed.start(0, nursery, emit)  # probed before the restart: not again
        await resumed.measured(0)
    assert calls == ["read", "probe"]
    assert resumed.floor(0) == book.floor(0)
    assert resumed.accepted_before(0) == sch.Claimed(3, 12, 30)
    count = await resumed.count(0, emit)
    assert count is not None
    assert count.rises == {"generation_tokens": 60.0}  # since the job's own start, not the restart

    unreadable = FloorBook(COUNTED, {}, probe, read)
    unreadable.restore({0: "{}", 7: kept[0]})  # a state of another shape, a job the campaign lacks
    assert unreadable.floor(0) is None
    assert unreadable.accepted_before(0) == sch.Claimed()


async def test_a_failed_read_before_the_job_leaves_it_with_the_floor_alone() -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    async def probe(spec: GenerateSpec, url: str, key: str | None) -> ServerTiming:
        return ServerTiming((50.0,), 0.4)

    async def read(url: str) -> MetricsPage:
        return MetricsPage(error="GET http://127.0.0.1:1/metrics: HTTP 501 'metrics not enabled'")

    book = FloorBook(COUNTED, {}, probe, read)
    emit = lambda name, **fields: events.append((name, fields))  # noqa: E731
    async with trio.open_nursery() as nursery:
        book.start(0, nursery, emit)
        await book.measured(0)
    assert book.floor(0) is not None
    assert await book.count(0, emit) is None
    [said] = [f for name, f in events if name == "server_count"]
    error = "GET http://127.0.0.1:1/metrics: HTTP 501 'metrics not enabled'"
    assert said == {"job": 0, "read": "before", "error": error, "values": {}}


def test_the_offer_leaves_the_metrics_url_out_and_puts_the_key_in() -> None:
    """The worker is not told where the submitter reads the server's counters."""
    spec = COUNTED.jobs[0].spec
    assert with_key(spec, {}).generate == spec.generate.with_(  # type: ignore[union-attr]
        endpoint=spec.generate.endpoint.with_(metrics_url=None)  # type: ignore[union-attr]
    )


def _load(*ttft_ms: float) -> Measurement:
    """A closed loop's measurement whose records' first tokens are `ttft_ms`."""
    records = [
        RequestRecord(
            prompt_id="a", prompt_tokens=3, output_tokens=2, ttft_ms=t, e2e_ms=t + 10.0,
            token_times_ms=(t, t + 10.0), started_s=i * 0.1,
        )
        for i, t in enumerate(ttft_ms)
    ]  # fmt: skip
    spec = COUNTED.jobs[0].spec.generate
    assert spec is not None
    stats = summarize_generation(records, 1.0, spec)
    return load_measurement(stats)


async def test_a_record_under_a_busy_moments_floor_has_the_server_probed_again_and_the_least_kept() -> None:
    """The weather's false positive (2026-11-27, load 13): the job's probe met a busy server (106 ms at
    its quickest), an honest record came in 36 ms. A result with a record under the floor has the
    server probed once more before it is judged: the floor is the least of the probes, and the
    probe's requests are the submitter's own (`own`) in the counted job's later rises. A result above
    the floor costs no probe; a later probe at a busier moment, or one that answers nothing, raises
    nothing; a state kept and restored carries the lowered floor and the probes' requests."""
    timings = [
        ServerTiming((106.0, 110.0, 108.0, 120.0, 107.0), 0.1, generated=5),  # the job's, busy
        ServerTiming((40.0, 38.5, 41.0, 39.0, 42.0), 0.1, generated=5),  # at the result: quieter
        ServerTiming((150.0, 160.0), 0.1, generated=2),  # busier again
        ServerTiming((), None, "connect: refused"),
    ]
    calls: list[str] = []
    events: list[tuple[str, dict[str, Any]]] = []
    kept: dict[int, str] = {}

    async def probe(spec: GenerateSpec, url: str, key: str | None) -> ServerTiming:
        calls.append("probe")
        await trio.lowlevel.checkpoint()
        return timings.pop(0)

    async def read(url: str) -> MetricsPage:
        return MetricsPage(LLAMA_BEFORE)

    emit = lambda name, **fields: events.append((name, fields))  # noqa: E731
    book = FloorBook(COUNTED, {}, probe, read, keep=kept.__setitem__)
    async with trio.open_nursery() as nursery:
        book.start(0, nursery, emit)
        await book.measured(0)
    busy = book.floor(0)
    assert busy is not None
    assert busy.floor_ms == 0.5 * (106.0 - PROBE_ALLOWANCE_MS - 0.1)

    await book.again(0, _load(60.0, 55.0), emit)  # above the floor: judged as it is
    assert calls == ["probe"]
    await book.again(0, _load(60.0, 36.0), emit)  # under it: the server probed again
    assert calls == ["probe", "probe"]
    lowered = book.floor(0)
    assert lowered is not None
    assert lowered.floor_ms == 0.5 * (38.5 - PROBE_ALLOWANCE_MS - 0.1) < 36.0
    assert "the least of the job's 2 probes" in lowered.said
    assert book.own(0) == sch.Claimed(5, 5, 0)  # the job's first probe is inside the rise's slack
    assert [(f["read"], f["floor_ms"]) for name, f in events if name == "server_floor"] == [
        ("before", round(busy.floor_ms, 3)),
        ("again", round(lowered.floor_ms, 3)),
    ]

    await book.again(0, _load(60.0, 1.0), emit)  # a liar's record: probed, busier, the floor stands
    await book.again(0, _load(60.0, 1.0), emit)  # and again: no answer, nothing learned
    assert calls == ["probe"] * 4
    assert book.floor(0) == lowered
    assert book.own(0) == sch.Claimed(7, 7, 0)

    resumed = FloorBook(COUNTED, {}, probe, read)
    resumed.restore(kept)
    assert resumed.floor(0) == lowered
    assert resumed.own(0) == sch.Claimed(7, 7, 0)
