"""Issue 50: which jobs the submitter measures the server of (a fleet's, a timed closed loop's), once a job,
whose offers wait for it (a lone closed loop's), and what a probe that answered or failed leaves."""

from __future__ import annotations

import json
from typing import Any

import trio

import scheduler as sch
from drivers import ServerTiming
from node.submitter.floors import FloorBook
from protocol import GenerateSpec

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


def test_a_fleet_and_a_timed_closed_loop_are_measured_and_only_the_lone_one_waits() -> None:
    book = FloorBook(CAMPAIGN, {})
    assert [book.wants(i) for i in range(len(JOBS))] == [True, True, False, False, False]
    # open loops are held to their planned sends, a count-sized loop to its count, a gray-box server
    # is the workers' own: none is probed
    assert [book.gates(i) for i in range(len(JOBS))] == [False, True, False, False, False]


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
    assert calls == [URL, URL]  # one probe a job; the open loop none
    floor = book.floor(0)
    assert floor is not None
    assert floor.floor_ms == 0.5 * (50.4 - 0.4)
    assert book.floor(1) is None  # the server did not answer: physics and the slots only
    said = sorted((f["job"], name, f["floor_ms"], f["error"]) for name, f in events)
    assert said == [(0, "server_floor", 25.0, ""), (1, "server_floor", None, "connect: cannot connect")]
