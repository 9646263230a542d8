"""A retry on trio's virtual clock: the endpoint client (`drivers.endpoint.completion.complete`,
unchanged) against a scripted server in the same trio run (`kit.clockserver`).

The waits between attempts are `trio.sleep`s, so under `MockClock` (autojump) seconds of backoff pass
at once and each attempt is heard at the instant it was sent, exactly, whatever the machine's load.
What is pinned: with no `Retry-After` the waits are the policy's backoff, doubling; a valid
`Retry-After` is waited exactly; a wait past the retry budget or the request's deadline is not waited
at all (the failure is reported at the instant it came); the retries stop at `max_retries`.
"""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing
from kit.clockserver import ClockServer, serve_on_clock
from kit.sse_server import Reply, Script, scheduled

from drivers.endpoint.completion import Outcome, RetryPolicy, Server, complete, open_client

POLICY = RetryPolicy(max_retries=3, max_wait_s=30.0, backoff_s=0.5)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def _refusing(*answers: Reply) -> Script:
    """The `answers` in turn, then a well-formed stream."""

    def script(body: dict[str, object], attempt: int) -> Reply:
        return answers[attempt] if attempt < len(answers) else scheduled(["a", "b"], usage=(1, 2))

    return script


def _busy(status: int = 503, retry_after: str | None = None) -> Reply:
    headers = (("retry-after", retry_after),) if retry_after is not None else ()
    return Reply(status=status, headers=headers, pieces=((0.0, b"busy"),))


async def _ask(
    script: Script, policy: RetryPolicy = POLICY, deadline_s: float = 600.0
) -> tuple[Outcome, ClockServer, float]:
    """One request through `complete`; its outcome, the server's log, and the instant it was asked."""
    async with serve_on_clock(script) as server, open_client() as client:
        began = trio.current_time()
        outcome = await complete(
            client, Server(server.url + "/v1/chat/completions", "m"), dict(BODY),
            deadline=began + deadline_s, retry=policy,
        )  # fmt: skip
        return outcome, server, began


def _gaps(server: ClockServer, began: float) -> list[float]:
    instants = [began, *server.instants()]
    return [round(b - a, 9) for a, b in itertools.pairwise(instants)]


async def test_without_retry_after_each_retry_waits_the_backoff_doubled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcome, server, began = await _ask(_refusing(_busy(), _busy(429), _busy(502)))
    assert _gaps(server, began) == [0.0, 0.5, 1.0, 2.0]  # asked at once, then 0.5 * 2**k
    assert outcome.retries == 3
    assert outcome.record.error is None
    assert outcome.record.attempts == 4


async def test_a_retry_after_is_waited_exactly_and_the_backoff_fills_in_where_it_is_absent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcome, server, began = await _ask(_refusing(_busy(429, "3"), _busy(503), _busy(503, "garbage")))
    # 3 s as the server said; then the backoff of the second retry (1 s), the third's (2 s): an
    # invalid Retry-After is as if absent
    assert _gaps(server, began) == [0.0, 3.0, 1.0, 2.0]
    assert (outcome.retries, outcome.record.error) == (3, None)


async def test_the_retries_stop_at_max_retries_and_the_failure_names_what_was_waited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = RetryPolicy(max_retries=2, max_wait_s=30.0, backoff_s=0.25)
    outcome, server, began = await _ask(_refusing(*[_busy()] * 5), policy)
    assert _gaps(server, began) == [0.0, 0.25, 0.5]
    assert trio.current_time() - server.instants()[-1] == pytest.approx(0.0, abs=1e-9)  # reported at once
    assert outcome.record.error == "server_error"
    assert outcome.record.error_detail.endswith("(after 2 retries, 0.8 s waited)")


@pytest.mark.parametrize(
    ("retry_after", "deadline_s", "why"),
    [("31", 600.0, "past the retry budget"), ("20", 10.0, "past the retry budget")],
    ids=["past-the-budget", "past-the-deadline"],
)
async def test_a_wait_past_the_budget_or_the_deadline_is_reported_at_once_never_waited(
    autojump_clock: trio.testing.MockClock, retry_after: str, deadline_s: float, why: str
) -> None:
    outcome, server, began = await _ask(_refusing(*[_busy(503, retry_after)] * 2), POLICY, deadline_s)
    assert _gaps(server, began) == [0.0]  # one attempt, no retry
    assert trio.current_time() == began  # nothing was waited: not the Retry-After, not the deadline
    assert outcome.retries == 0
    assert outcome.record.error == "server_error"
    assert why in outcome.record.error_detail
