"""The submitter's own view of a model server: its round trip and the least time it takes to answer.

Before a fleet or a closed loop is dealt, the submitter measures the server itself, from its own
vantage point, through the same client the workers use: the round trip of TCP's handshake
(`drivers.endpoint.rtt`) and `FLOOR_SAMPLES` streamed completions of one token, one after another,
of the shortest prompt a worker could send (`PROBE_PROMPT`, "Say OK."), each carrying `PROBE_USER`
in the body's `user` field (OpenAI's end-user id, which servers accept and ignore) so a server's log
can tell them from the load. A request's first token needs one round trip and the server's own work;
the shortest first token less this vantage point's round trip is the least the server took to answer
anyone, which `scheduler.verification.serverfloor` turns into the floor no worker's record may go
under. Nothing here reads a worker's figures.

Its reads are timed as the workers' are: by the kernel, where each packet arrived
(`http1.kernel_stamps`, Linux), not when this process got to read it. A submitter is often the busy
machine (its event loop serves the swarm; other work shares its cores), and a probe timed at the read
took its delays for the server's: a stub answering on loopback in 0.1 ms was read at 0.34 ms and an
honest record of 0.11 ms (kernel-stamped on the worker) was refused under a floor of 0.15 ms; a 20 ms
server's fleet member was refused beside the suite at load 4. Elsewhere the read takes its own time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import trio

from drivers.endpoint.completion import RetryPolicy, Server, complete, open_client, request_body
from drivers.endpoint.http1 import kernel_stamps
from drivers.endpoint.load import completions_url
from drivers.endpoint.rtt import measure_rtt
from protocol import GenerateSpec, Prompt

FLOOR_SAMPLES: Final = 5
"""Requests one after another: the shortest of five is the server at its quickest (a warm connection,
a warm prompt cache) without asking a loaded server for many."""
FLOOR_TIMEOUT_S: Final = 20.0
PROBE_PROMPT: Final = Prompt(id="sark-floor-probe", text="Say OK.")
PROBE_USER: Final = "sark-floor-probe"
_NO_RETRY: Final = RetryPolicy(max_retries=0)


@dataclass(frozen=True)
class ServerTiming:
    """What the submitter measured of a server itself, in milliseconds.

    Attributes:
        ttft_ms: the first-token time of each successful probe request, in the order sent.
        rtt_ms: the median round trip of TCP's handshake (`drivers.endpoint.rtt`), None if no connect
            succeeded.
        error: why no request succeeded (the last failure), "" when one did.
        generated: the tokens the successful requests generated, as a load's records are counted
            (the server's usage where it said it, else one for the first token seen): what a server's
            counters rose by for the probe, so that a probe taken while a job is counted is not slack
            for its loads (`node.submitter.floors`).
    """

    ttft_ms: tuple[float, ...]
    rtt_ms: float | None
    error: str = ""
    generated: int = 0


async def probe_floor(
    spec: GenerateSpec, url: str, *, api_key: str | None = None, timeout_s: float = FLOOR_TIMEOUT_S
) -> ServerTiming:
    """Measure the server at `url` for the job `spec` (its model, chat or completions) from here.

    Never raises for a network or server failure: what it could not take is missing, with the reason.
    """
    assert spec.endpoint is not None
    deadline = trio.current_time() + timeout_s
    rtt = await measure_rtt(url, samples=3)
    server = Server(completions_url(url, spec.chat), spec.endpoint.model, api_key)
    body = request_body(spec.endpoint.model, PROBE_PROMPT, spec.with_(max_new_tokens=1, ignore_eos=False))
    body["max_tokens"] = 1
    body["user"] = PROBE_USER
    firsts: list[float] = []
    generated = 0
    error = ""
    async with kernel_stamps(), open_client() as client:  # each read timed where its bytes arrived
        for _ in range(FLOOR_SAMPLES):
            outcome = await complete(client, server, body, deadline=deadline, retry=_NO_RETRY)
            record = outcome.record
            if record.error is not None:
                error = f"{record.error}: {record.error_detail}"[:300]
                if trio.current_time() >= deadline:
                    break
                continue
            firsts.append(record.ttft_ms if record.ttft_ms is not None else record.e2e_ms)
            generated += 1 if record.tokens_counted else record.output_tokens
    return ServerTiming(tuple(firsts), rtt.connect_ms, "" if firsts else error or rtt.error, generated)


__all__ = ["FLOOR_SAMPLES", "PROBE_PROMPT", "PROBE_USER", "ServerTiming", "probe_floor"]
