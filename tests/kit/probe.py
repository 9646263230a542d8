"""A `sark-node peers`-like probe for the labs: find workers, then a `/sark/profile` round trip to each.

Run as a child process (also inside a namespace with `ip netns exec`):
    python tests/kit/probe.py --gate ADDR [--gate ADDR] --listen MULTIADDR --data-dir DIR --expect N
Prints JSON event lines: `found` (the workers the DHT shows), then one `profile` per worker (ok,
whether the connection went through a relay, first and second round-trip ms, error), then `done`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trio

from node.config import NodeConfig
from node.errors import NodeError
from node.p2p.node import Node, Peer, open_node
from protocol import ProtocolError


def emit(event: str, **fields: Any) -> None:
    """One JSON event line on stdout."""
    print(json.dumps({"event": event, **fields}), flush=True)


async def find(node: Node, expect: int, timeout: float) -> list[Peer]:
    """Look up workers until `expect` are listed or `timeout` passes (adverts are hints: ask again)."""
    peers: list[Peer] = []
    with trio.move_on_after(timeout):
        while True:
            peers = (await node.look(timeout=timeout)).peers
            if len(peers) >= expect:
                break
            await trio.sleep(0.2)  # a lookup is not an event we can wait on; bounded by `timeout`
    return peers


async def round_trip(node: Node, peer: Peer, timeout: float) -> None:
    """Two `/sark/profile` round trips (the first sets the connection up), reported as a `profile` event."""
    times: list[float] = []
    try:
        for _ in range(2):
            start = time.monotonic()
            body, _ = await node.fresh_profile(peer, timeout=timeout)
            times.append(round((time.monotonic() - start) * 1000, 1))
    except (NodeError, ProtocolError) as exc:
        emit("profile", peer_id=peer.peer_id, ok=False, error=str(exc)[:3000])
        return
    relayed = node.host.is_relayed(peer.peer_id)
    emit("profile", peer_id=peer.peer_id, ok=body.peer_id == peer.peer_id, relayed=relayed, ms=times)


async def main(args: argparse.Namespace) -> None:
    """Open a node, list the workers, ask each for its profile."""
    config = NodeConfig(data_dir=Path(args.data_dir), gates=tuple(args.gate), listen=(args.listen,))
    async with open_node(config, role="submitter") as node:
        peers = await find(node, args.expect, args.timeout)
        emit(
            "found",
            peers=[
                {"peer_id": p.peer_id, "addrs": list(p.dial_addrs()), "reachability": p.advert.reachability}
                for p in peers
            ],
        )
        for peer in peers:
            await round_trip(node, peer, args.timeout)
    emit("done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gate", action="append", required=True)
    parser.add_argument("--listen", default="/ip4/127.0.0.1/tcp/0")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=15.0)
    trio.run(main, parser.parse_args())
