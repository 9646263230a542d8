"""A worker holds connections to `GATE_LINKS` of its gates, the rest spares (issue 50), on real hosts on
loopback: a worker given four gates joins three of them and never dials the fourth; a gate it holds
stopped, `serve_worker` notices it and joins the spare in its place (the rule itself, on every draw:
tests/unit/node/p2p/test_gate_links.py)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from kit import owntime
from kit.data import make_profile

from gate import open_gate
from node.config import NodeConfig
from node.p2p.gates import GATE_LINKS
from node.p2p.host import peer_of
from node.p2p.node import Node, open_node
from node.worker.advertising import serve_worker
from protocol import Load

if TYPE_CHECKING:
    from trio_typing import TaskStatus

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


def config(root: Path, name: str, gates: tuple[str, ...] = ()) -> NodeConfig:
    return NodeConfig(data_dir=root / name, listen=LOOPBACK, record_ttl_s=60, gates=gates)


async def run_gate(config: NodeConfig, stop: trio.Event, task_status: TaskStatus[Node]) -> None:
    """A gate until `stop` is set (each in its own task: one stops while the others run)."""
    async with open_gate(config) as gate:
        task_status.started(gate)
        await stop.wait()


async def test_a_worker_joins_gate_links_of_its_gates_and_a_spare_for_one_lost(tmp_path: Path) -> None:
    with owntime.fail_after(90):
        async with trio.open_nursery() as gates_running:
            stops = [trio.Event() for _ in range(GATE_LINKS + 1)]
            gates: list[Node] = []
            for i, stop in enumerate(stops):
                gates.append(await gates_running.start(run_gate, config(tmp_path, f"g{i}"), stop))
            addrs = tuple(g.host.addrs()[0] for g in gates)
            async with open_node(config(tmp_path, "w", gates=addrs), role="worker") as worker:
                held = list(worker.gates)
                assert len(held) == GATE_LINKS
                (spare,) = (a for a in addrs if a not in held)
                spare_gate = gates[addrs.index(spare)]
                assert not spare_gate.host.is_connected(worker.host.peer_id)  # never dialled
                async with trio.open_nursery() as nursery:
                    await nursery.start(partial(serve_worker, worker, make_profile("w"), Load))
                    lost = held[1]
                    stops[addrs.index(lost)].set()  # the gate stops
                    while spare not in worker.gates:  # noqa: ASYNC110 (a timer in the worker: GATE_CHECK_S)
                        await trio.sleep(0.1)
                    assert sorted(worker.gates) == sorted([*held[:1], *held[2:], spare])
                    assert worker.host.is_connected(peer_of(spare))
                    assert not worker.host.is_connected(peer_of(lost))
                    assert spare_gate.host.is_connected(worker.host.peer_id)
                    nursery.cancel_scope.cancel()
            for stop in stops:
                stop.set()
