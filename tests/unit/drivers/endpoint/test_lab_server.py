"""The lab's scripted server behaves as the real servers the capacity and timing labs stand for:
a token is on the wire when written (TCP_NODELAY), and a level's connections opened at once are all
taken even while the machine is slow to accept (a real listen backlog)."""

from __future__ import annotations

import socket
import time

from kit.sse_server import scheduled, serve_sse

from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions, run_endpoint
from protocol import Endpoint, GenerateSpec, Prompt


def test_tokens_leave_when_written() -> None:
    """Without TCP_NODELAY every token after the headers waited for the client's delayed ACK (40 ms
    on Linux) on a kept-alive connection: first tokens read 43 ms for 20. The kernel's word on each
    connection is the check (`SseServer.nodelay`): a band on the first token's time read the
    machine's load instead (36 ms for 20 at load 4, 2026-11-30)."""
    reply = scheduled(["a", "b", "c", "d"], first_s=0.02, every_s=0.005, usage=(3, 4))
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(12))
    spec = GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=4,
        concurrency=1,
        endpoint=Endpoint(model="m"),
    )
    with serve_sse(lambda body, attempt: reply) as server:
        options = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1)
        run = run_endpoint(spec, server.url, deadline_s=60.0, options=options)
    assert [r.output_tokens for r in run.records] == [4] * len(prompts)
    assert len(server.nodelay) >= len(prompts)  # every request answered, each on a connection that
    assert all(server.nodelay)  # sends a write at once


def test_a_burst_of_connections_waits_for_no_retry() -> None:
    reply = scheduled(["a"])
    with serve_sse(lambda body, attempt: reply) as server:
        port = int(server.url.rsplit(":", 1)[1])
        started = time.monotonic()
        burst = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(64)]
        assert time.monotonic() - started < 0.9  # no SYN dropped and retried a second later
        for conn in burst:
            conn.close()
