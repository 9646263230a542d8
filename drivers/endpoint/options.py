"""How to run a load against a model server, beyond what the spec says: `EndpointOptions`.

Its own module because both the run (`drivers.endpoint.load`) and the sending loop
(`drivers.endpoint.sender`) read it, and the run imports the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from drivers.endpoint.budget import MAX_RUN_BYTES, MAX_RUN_PIECES, MAX_RUN_TEXT, MAX_RUN_TIMES
from drivers.endpoint.completion import Outcome, RetryPolicy
from protocol import ComputeUnit

DRAIN_S: Final = 30.0
"""How long the requests still in flight when a `duration_s` run's sending ends may take to finish
(AIPerf's benchmark grace period is the same idea). Past it they end as `deadline`, the server's fault:
a server that holds its answers never keeps a timed job, nor the worker, until the task's timeout."""


@dataclass(frozen=True)
class EndpointOptions:
    """How to run against the server, beyond what the spec says.

    Attributes:
        connect_ip: the address the worker checked against its URL policy; connections go there.
        seed: the open loop's RNG seed when the spec has none (drawn and returned when None too).
        request_timeout_s: a deadline per request, besides the run's (None: the run's only).
        retry: how 429 and 5xx answers are retried.
        rtt_samples: TCP connects timed before the run.
        max_requests: send at most this many (None: `MAX_RECORDS`).
        watch: called with the outcomes so far each time a request ends; True ends the run there:
            nothing more is sent, and the requests still in flight end but are left out (a capacity
            level judged over-saturated on exactly the outcomes kept). They are not cancelled: a
            cancel while httpx sends a body abandons its async generator (trio warns).
        budget: what the run's requests in flight may keep together, (bytes, pieces), and what its
            ended requests keep (text characters, token times) (`drivers.endpoint.budget`).
        energy_unit: set only when the worker's owner declared that the server runs on this device
            (gray-box): the unit whose energy source (`drivers.measuring.energy`) covers the server's
            hardware. None: the server's energy is not this device's, and none is read.
        drain_s: a `duration_s` run's grace for the requests in flight when its sending ends
            (`DRAIN_S`); the run's deadline is then the earlier of its own and the duration's end plus it.
    """

    connect_ip: str | None = None
    seed: int | None = None
    request_timeout_s: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rtt_samples: int = 5
    max_requests: int | None = None
    watch: Callable[[Sequence[Outcome]], bool] | None = None
    budget: tuple[int, int, int, int] = (MAX_RUN_BYTES, MAX_RUN_PIECES, MAX_RUN_TEXT, MAX_RUN_TIMES)
    energy_unit: ComputeUnit | None = None
    drain_s: float = DRAIN_S
