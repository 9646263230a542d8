"""Sybil providers for the discovery labs: many fresh keys announcing through the node's own path.

    python tests/kit/sybils.py --gate MULTIADDR --count N --data-dir DIR [--mode stall|junk]

Each key is a real node of this code (`open_node`, role worker) that signs an advert and places it and
its provider records with the node's own `Dht.publish` (one after another, so the first twenty fill
the any-worker tree's root key before any honest worker comes), then answers `/sark/profile`:

    stall   never: the stream opens and nothing comes back (a probe waits out its deadline)
    junk    with another key's advert (signed, but not by the asker's peer: refused as junk)

It prints `{"event": "ready", "peer_ids": [...], "seconds": S}` once every key is out, then serves until
killed; a test that kills it makes the same keys "gone" (their records stay listed for the TTL, every
dial is refused). Keys are free: minting and placing twenty takes seconds. Nothing in the product reads
this file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from kit.data import make_profile
from node.config import NodeConfig
from node.p2p.identity import load_seed
from node.p2p.node import Node, open_node
from node.p2p.wire import Channel
from protocol import DOMAIN_ADVERT, PROFILE, AdvertBody, ComputeUnit, Envelope, Load, ProfileReply
from protocol.records import seal

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


def advert(node: Node, ttl: float) -> Envelope:
    """The key's signed advert: a plain CPU device, listed for `ttl` seconds."""
    now = time.time()
    body = AdvertBody(
        peer_id=node.host.peer_id,
        seq=int(now * 1000),
        issued_at=now - 1,
        expires_at=now + ttl,
        profile=make_profile(),
        addrs=tuple(node.host.addrs()),
    )
    return seal(body, DOMAIN_ADVERT, load_seed(node.config.key_file()))


def answer(mode: str, other: Envelope) -> object:
    async def stall(channel: Channel) -> None:
        await channel.receive()
        await trio.sleep_forever()

    async def junk(channel: Channel) -> None:
        await channel.receive()
        await channel.send(ProfileReply(advert=other, load=Load()))
        await channel.close()

    return stall if mode == "stall" else junk


async def main(gate: str, count: int, root: Path, mode: str, ttl: float) -> None:
    started = time.monotonic()
    async with AsyncExitStack() as stack:
        nodes: list[Node] = []
        for i in range(count):
            config = NodeConfig(data_dir=root / f"s{i}", gates=(gate,), listen=LOOPBACK, record_ttl_s=ttl)
            node = await stack.enter_async_context(open_node(config, role="worker"))
            await node.dht.publish(advert(node, ttl), [ComputeUnit.CPU_ONNX], gates=node.gates)
            nodes.append(node)
        for i, node in enumerate(nodes):
            other = advert(nodes[(i + 1) % len(nodes)], ttl)
            node.host.set_handler(PROFILE, answer(mode, other), deadline=3600.0)  # type: ignore[arg-type]
        ids = [n.host.peer_id for n in nodes]
        print(
            json.dumps({"event": "ready", "peer_ids": ids, "seconds": round(time.monotonic() - started, 2)})
        )
        sys.stdout.flush()
        await trio.sleep_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate", required=True)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--mode", choices=("stall", "junk"), default="stall")
    parser.add_argument("--record-ttl", type=float, default=30.0)
    args = parser.parse_args()
    trio.run(main, args.gate, args.count, args.data_dir, args.mode, args.record_ttl)
