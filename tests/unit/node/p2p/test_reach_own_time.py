"""A dial-back counts the prober's own seconds (`node.p2p.reach`, `node.p2p.looktime`): a gate the
machine starves (its run delay grows by 0.9 of every real second: `test_walk_own_time._starving`)
still reaches a worker whose handshake took `DIAL_S` of real time, where on real seconds the same dial
timed out and the worker was told "relayed"; and a worker starved so still reads the gate's answer
past `ASK_TIMEOUT_S` of real time.

On trio's virtual clock, with the two ends a dial-back touches: the prober's throwaway host (its
`connect`) and the stream the asker reads; the dial itself is a real one in the reach labs
(tests/labs/swarm/test_shards.py, tests/labs/faults/test_gates.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
import trio
import trio.testing

from node.errors import PeerTimeout
from node.p2p.host import Host
from node.p2p.looktime import no_delay
from node.p2p.reach import ASK_TIMEOUT_S, PROBE_TIMEOUT_S, ask_reach, reach_handler
from node.p2p.wire import Channel
from protocol import ReachGet, ReachReply
from unit.node.p2p.test_walk_own_time import _starving

DIAL_S = 2 * PROBE_TIMEOUT_S
"""Real seconds the dial-back's connection takes: 0.6 s of the starved prober's own."""
WORKER = "12D3KooWorker"


class _Probe:
    """The prober's throwaway host: each connection takes `DIAL_S` (or fails at its own timeout)."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    async def connect(self, addr: str, timeout: float = 10.0) -> str:
        self.timeouts.append(timeout)
        with trio.fail_after(timeout):
            await trio.sleep(DIAL_S)
        return WORKER

    async def disconnect(self, peer_id: str) -> None:
        pass


class _Asked:
    """The gate's end of a worker's `/sark/reach` stream: the worker asks from 127.0.0.1."""

    peer_id = WORKER
    remote_ip = "127.0.0.1"

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def receive(self) -> ReachGet:
        return ReachGet(addrs=(f"/ip4/0.0.0.0/tcp/4001/p2p/{WORKER}",))

    async def send(self, message: Any) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        pass

    async def reset(self) -> None:
        raise AssertionError("a well-formed ask is answered")


async def _answer(run_delay: Callable[[], Callable[[], float]]) -> tuple[ReachReply, _Probe]:
    probe, asked = _Probe(), _Asked()
    await reach_handler(cast(Host, probe), run_delay)(cast(Channel, asked))
    (reply,) = asked.sent
    return reply, probe


async def test_a_starved_gate_reaches_a_worker_its_dial_back_timed_out_on_real_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starved, probe = await _answer(_starving)
    assert starved.reachable
    assert starved.addr == f"/ip4/127.0.0.1/tcp/4001/p2p/{WORKER}"  # the port claimed, at the IP observed
    assert probe.timeouts[0] > DIAL_S  # the dial's own bound is real time enough: at most STRETCH_MAX x
    quiet, _ = await _answer(lambda: no_delay)
    assert not quiet.reachable
    assert quiet.detail == f"/ip4/127.0.0.1/tcp/4001/p2p/{WORKER}: no connection within {PROBE_TIMEOUT_S:g} s"


class _Answering:
    """The worker's host: the gate's answer comes `seconds` after the ask."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def addrs(self) -> list[str]:
        return [f"/ip4/127.0.0.1/tcp/4001/p2p/{WORKER}"]

    async def open_channel(self, peer_id: str, protocol: str, **bounds: float | tuple[str, ...]) -> Any:
        seconds = self.seconds

        class _Stream:
            async def __aenter__(self) -> _Stream:
                return self

            async def __aexit__(self, *exc: object) -> None:
                pass

            async def send(self, message: Any) -> None:
                assert isinstance(message, ReachGet)

            async def receive(self) -> ReachReply:
                with trio.fail_after(cast(float, bounds["read_timeout"])):
                    await trio.sleep(seconds)
                return ReachReply(reachable=True, addr=f"/ip4/127.0.0.1/tcp/4001/p2p/{WORKER}")

        return _Stream()


async def test_a_starved_worker_reads_the_answer_its_ask_timed_out_on_real_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    late = cast(Host, _Answering(2 * ASK_TIMEOUT_S))  # 1.6 s of a starved worker's own
    reply = await ask_reach(late, "gate", ("/ip4/127.0.0.1/tcp/1/p2p/gate",), waited=_starving())
    assert reply.reachable
    with pytest.raises(PeerTimeout, match=f"no answer to reach_get within {ASK_TIMEOUT_S:g} s"):
        await ask_reach(late, "gate", ("/ip4/127.0.0.1/tcp/1/p2p/gate",), waited=no_delay)
