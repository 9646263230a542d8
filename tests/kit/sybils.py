"""Sybil providers for the discovery labs: many fresh keys announcing through the node's own path.

    python tests/kit/sybils.py --gate MULTIADDR --count N --data-dir DIR [--mode stall|junk|mixed]
        [--bind IP] [--fill] [--no-advert]

Each key is a real node of this code (`open_node`, role worker) that signs an advert and places it and
its provider records with the node's own `Dht.publish` (one after another, so the first twenty fill
the any-worker tree's root key before any honest worker comes), then answers `/sark/profile`:

    stall   never: the stream opens and nothing comes back (a probe waits out its deadline)
    junk    with another key's advert (signed, but not by the asker's peer: refused as junk)
    mixed   the even keys stall, the odd ones answer junk

`--bind IP` (a loopback address such as 127.0.1.1) puts every key's listen address and the source of
every connection it dials there, so a server reads that network as the kernel gives it (issue 50: places
per network). `--fill` places the keys as a cheater who reads nothing would: key i at the i // 20-th key
of the tree in level order (root, then level 1, ...), twenty to a key, so that 200 fill the first three
levels (the keys a look reads first) and three keys of the fourth; the node's own `publish` then sends
the records (no read-back: a Sybil that is not kept is not told). `--no-advert` puts no advert in the
DHT (the node's `publish` with its PUT left out): a reader has the provider records alone, as it has
for the workers of a gate that keeps no `/sark/` values, and must ask each key itself.

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
from node.p2p.shards import SHARD_CAP, Shard
from node.p2p.wire import Channel
from protocol import DOMAIN_ADVERT, PROFILE, AdvertBody, ComputeUnit, Envelope, Load, ProfileReply
from protocol.records import seal

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
UNITS = (ComputeUnit.CPU_ONNX,)


def bind_dials(ip: str) -> None:
    """Every TCP dial of this process leaves from `ip` (the kernel then shows that address to servers)."""
    from libp2p.transport.tcp.tcp import TCP

    async def dial(self: TCP, maddr: object) -> object:
        return await self.dial_with_source(maddr, (ip, 0))  # type: ignore[arg-type]

    TCP.dial = dial  # type: ignore[assignment,method-assign]


def filled(i: int, unit: ComputeUnit | None) -> Shard:
    """Key i's place under `--fill`: the (i // SHARD_CAP)-th key of the tree in level order."""
    slot = i // SHARD_CAP
    level = (slot + 1).bit_length() - 1
    return Shard(unit, level, slot + 1 - 2**level)


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


async def no_put(*_: object) -> None:
    """A Sybil's `Kad.put` under `--no-advert`: nothing sent."""


async def main(
    gate: str, count: int, root: Path, mode: str, ttl: float, bind: str, fill: bool, bare: bool
) -> None:
    started = time.monotonic()
    listen = LOOPBACK
    if bind:
        bind_dials(bind)
        listen = (f"/ip4/{bind}/tcp/0",)
    async with AsyncExitStack() as stack:
        nodes: list[Node] = []
        for i in range(count):
            config = NodeConfig(data_dir=root / f"s{i}", gates=(gate,), listen=listen, record_ttl_s=ttl)
            node = await stack.enter_async_context(open_node(config, role="worker"))
            if fill:  # the cheater's choice of keys: placed, so publish only sends
                node.dht.placed.update({u: filled(i, u) for u in (None, *UNITS)})
            if bare:
                node.dht.kad.put = no_put  # type: ignore[assignment,method-assign]
            await node.dht.publish(advert(node, ttl), UNITS, gates=node.gates)
            nodes.append(node)
        for i, node in enumerate(nodes):
            other = advert(nodes[(i + 1) % len(nodes)], ttl)
            how = ("stall", "junk")[i % 2] if mode == "mixed" else mode
            node.host.set_handler(PROFILE, answer(how, other), deadline=3600.0)  # type: ignore[arg-type]
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
    parser.add_argument("--mode", choices=("stall", "junk", "mixed"), default="stall")
    parser.add_argument("--record-ttl", type=float, default=30.0)
    parser.add_argument("--bind", default="")
    parser.add_argument("--fill", action="store_true")
    parser.add_argument("--no-advert", action="store_true")
    args = parser.parse_args()
    trio.run(
        main,
        args.gate,
        args.count,
        args.data_dir,
        args.mode,
        args.record_ttl,
        args.bind,
        args.fill,
        args.no_advert,
    )
