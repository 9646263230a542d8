"""Issue 50: the submitter's own probe of a fleet's server (its round trip and shortest first token),
marked so the server can tell it from the load, and a server that fails it gives no figure, with why."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from kit.sse_server import Reply, scheduled, serve_sse

from drivers.endpoint import floorprobe
from drivers.endpoint.floorprobe import FLOOR_SAMPLES, PROBE_USER, probe_floor
from protocol import Endpoint, GenerateSpec, Prompt

FIRST_S = 0.03


def _spec(url: str) -> GenerateSpec:
    return GenerateSpec(
        prompts=(Prompt(id="a", text="a long prompt of the job"),),
        prompts_sha256="0" * 64,
        max_new_tokens=64,
        endpoint=Endpoint(model="m", url=url),
    )


def test_the_probe_times_five_one_token_requests_marked_as_the_submitters() -> None:
    script = lambda body, attempt: scheduled(["OK"], first_s=FIRST_S, usage=(3, 1))  # noqa: E731
    with serve_sse(script) as server:
        timing = trio.run(probe_floor, _spec(server.url), server.url)
        probes, seen = list(server.probes), list(server.seen)
    assert len(timing.ttft_ms) == FLOOR_SAMPLES
    assert min(timing.ttft_ms) >= FIRST_S * 1e3  # the server's own wait, seen from here
    assert timing.rtt_ms is not None
    assert timing.error == ""
    assert seen == []  # every request was the probe's, none counted as load
    assert len(probes) == FLOOR_SAMPLES
    assert all(p.body["user"] == PROBE_USER and p.body["max_tokens"] == 1 for p in probes)


def test_a_server_that_fails_every_probe_gives_no_figure_and_says_why() -> None:
    failing = Reply(500, (("content-type", "text/plain"),), ((0.0, b"overloaded"),))
    with serve_sse(lambda body, attempt: failing) as server:
        timing = trio.run(probe_floor, _spec(server.url), server.url)
    assert timing.ttft_ms == ()
    assert timing.error.startswith("server_error")


def test_the_probe_reads_are_stamped_by_the_kernel_as_the_workers_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A busy submitter timed its probe at the read and took its own delays for the server's: honest
    records (kernel-stamped on their worker) were refused under the floor beside the suite at load 4.
    The probe holds the same kernel stamping on as the load does for its whole run."""
    held: list[bool] = []
    real = floorprobe.kernel_stamps

    @asynccontextmanager
    async def watched() -> AsyncIterator[bool]:
        async with real() as on:
            held.append(on)
            yield on
            held.append(on)

    monkeypatch.setattr(floorprobe, "kernel_stamps", watched)
    script = lambda body, attempt: scheduled(["OK"], first_s=FIRST_S, usage=(3, 1))  # noqa: E731
    with serve_sse(script) as server:
        timing = trio.run(probe_floor, _spec(server.url), server.url)
    assert len(timing.ttft_ms) == FLOOR_SAMPLES
    assert held == [sys.platform == "linux"] * 2  # on (Linux) around every request
