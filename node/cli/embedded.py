"""The embedded local swarm: a gate and workers on loopback, for `submit`, `plan` and `serve` with no gate.

It lives in the CLI, the composition root, because it is the one place that composes the gate role
with the worker role; the submitter gets it as `SubmitOptions.swarm`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final

import trio

from drivers.measuring.device import device_name
from gate import serve_gate
from node.config import NodeConfig
from node.p2p.identity import identity_peer_id
from node.worker.role import device_profile, open_worker

EMBEDDED_LEASE_TTL_S: Final = 120.0
"""The silence after which an embedded worker's lease lapses (at least; a join worker's default is
10 s). Its heartbeats come from the submitter's own process, so their silence measures that
process's starvation, never a worker gone or frozen apart from it: at load 20 on 2 cores, README's
recipe lost both leases, "no heartbeat for 10 s", while its workers measured. The lease still ends
at its end (`scheduler.state.leases`: the task's timeout, whatever the heartbeats), and a failure
is still reported as one."""


def embedded_worker(config: NodeConfig, i: int, gates: tuple[str, ...], me: str, name: str) -> NodeConfig:
    """The configuration of embedded worker `i` (named `name`): on loopback, at the embedded gate,
    taking offers from this submitter (`me`) only, its lease's silence `EMBEDDED_LEASE_TTL_S`."""
    return config.with_(
        data_dir=config.data.embedded(f"worker-{i}"),
        listen=("/ip4/127.0.0.1/tcp/0",),
        gates=gates,
        allow=(me,),
        open_mode=False,
        device_name=name,
        lease_ttl_s=max(config.lease_ttl_s, EMBEDDED_LEASE_TTL_S),
    )


@asynccontextmanager
async def embedded_swarm(config: NodeConfig, workers: int) -> AsyncIterator[NodeConfig]:
    """A gate and `workers` local workers on loopback that take offers from this submitter only.

    Yields the submitter's configuration pointed at the embedded gate.
    """
    me = identity_peer_id(config.key_file())
    base = config.device_name or device_name()
    loopback = ("/ip4/127.0.0.1/tcp/0",)
    gate_config = config.with_(data_dir=config.data.embedded("gate"), listen=loopback, gates=())
    async with trio.open_nursery() as nursery:
        gates = tuple(await nursery.start(serve_gate, gate_config))
        first = config.with_(data_dir=config.data.embedded("worker-0"), endpoints={})
        profile = await device_profile(first)  # one probe child for every local worker: one device
        async with AsyncExitStack() as stack:
            for i in range(workers):
                name = f"{base}-{i}"  # the same names whatever `workers` is: reports of runs compare
                worker_config = embedded_worker(config, i, gates, me, name)
                # its only submitter is this process, which does not challenge its own workers
                # (`node.submitter.run.own_workers`): no challenge child waits beside it
                worker = open_worker(worker_config, profile.with_(device_name=name), challenged=False)
                await stack.enter_async_context(worker)
            yield config.with_(gates=gates, listen=loopback)
        nursery.cancel_scope.cancel()
