"""DHT servers of this code for the hostile-server lab: honest ones, hostile ones ground near a key, and
honest providers.

    python tests/kit/dhtservers.py --gate MULTIADDR --data-dir DIR --servers N
        [--hostile-near KEYHEX --bits B --sybils S [--sybil-seed HEX]] [--providers P] [--listen IP]
        [--answer-delay S] [--ground-near KEYHEX --bits B]

Each server is a real node of this code (`open_node`, `dht_mode = "server"`) joined through the gate.
With `--hostile-near`, each server's key is ground (fresh Ed25519 seeds until the first `B` bits of its
kad id are the key's: free keys, a few hundred tries) so that it is among the key's closest, and its
provider store is patched: it keeps no provider record it is sent, and answers every GET_PROVIDERS with
the same `S` Sybil providers (fresh peer ids at a loopback port where nothing listens). These are the
hostile servers of issue 50 scope 2: they see the key and choose their ids, their lists and how fast
they answer (at once); `--sybil-seed` derives the Sybils from a seed, so that hostile servers in
several processes (on several networks: `--listen`, an address of a lab namespace's own, loopback
otherwise) list the same ones. With `--providers`, `P` honest worker nodes (client mode) then place their
signed adverts and provider records with the node's own `Dht.publish`, as a `join` worker does, and
answer `/sark/profile` as a worker does (a submitter's discovery probe). `--answer-delay S`: on
SIGUSR1 after `ready`, honest servers answer every kad request S seconds late (a wide-area round trip
away) and it prints `{"event": "late"}`. `--ground-near`: honest servers whose ids are ground near a
key as the hostile ones are (`--bits`), so that they are its closest after the hostile ones.

It prints `{"event": "ready", "servers": [...], "providers": [...], "sybils": [...], "seconds": S,
"placed": {provider: {tree: level}}, "root": {provider: {"union": U, "holds": H}}}` once every node is
up and every record placed (`placed`: the level of each tree's key each provider placed at, "any" and
the unit's; `root`: the any-worker tree's root key as each provider reads it last, every holder's
answer: the union of the lists and what most of the holders' networks say, `ProviderLookup.holds`),
then serves until killed. Nothing in the product reads this file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from multiaddr import Multiaddr

from kit.sybils import LOOPBACK, advert
from node.config import NodeConfig
from node.p2p.dht import EVERY_PROVIDER
from node.p2p.identity import SEED_BYTES, peer_id_of_seed
from node.p2p.node import Node, open_node
from node.p2p.shards import Shard, unit_name
from node.p2p.shortlist import key_distance
from node.p2p.wire import Channel
from protocol import KAD, PROFILE, ComputeUnit, Load, ProfileReply

OPENING = 4
"""Nodes opening at once: each one's bootstrap asks the servers already up (one after another, the
sixteenth hostile server took seconds to open)."""
NOWHERE = "/ip4/127.0.0.1/tcp/9"
"""The Sybils' address: the discard port, where nothing of the lab listens (every dial is refused)."""


def answer_profile(node: Node) -> Any:
    """An honest provider's `/sark/profile` answer, as a worker's (`node.worker.advertising`): its
    signed advert and load, so that a submitter's discovery probe finds it live."""

    async def profile(channel: Channel) -> None:
        await channel.receive()
        await channel.send(ProfileReply(advert=advert(node, 300.0), load=Load()))
        await channel.close()

    return profile


def ground_seed(key: bytes, bits: int) -> bytes:
    """A seed whose peer's kad id (sha256 of the peer id's bytes) shares its first `bits` bits with
    the key's (sha256 of the key), as `node.p2p.shortlist.key_distance` measures."""
    return _seed_at(key, lambda distance: distance >> (256 - bits) == 0)


def far_seed(key: bytes) -> bytes:
    """A seed whose peer's kad id differs from the key's in its first bit: farther from the key than
    every id that shares it (half of all ids)."""
    return _seed_at(key, lambda distance: distance >> 255 == 1)


def _seed_at(key: bytes, accept: Callable[[int], bool]) -> bytes:
    """Fresh seeds until one's peer is at a kad distance from `key` that `accept`s."""
    distance = key_distance(key)
    while True:
        seed = os.urandom(SEED_BYTES)
        if accept(distance(ID.from_base58(peer_id_of_seed(seed)))):
            return seed


def write_seed(root: Path, seed: bytes) -> None:
    """The node's key file, as `load_seed` wants it (mode 0600)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "identity.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(seed)


def answer_late(node: Node, delay: float) -> None:
    """Answer every kad request `delay` seconds late (from now on): an honest server a wide-area round
    trip away, where hostile servers ground near a key answer at once (their timing is their choice;
    netem, which would delay the link itself, does not exist on this kernel)."""
    raw = node.dht.kad.raw

    async def late(stream: Any) -> None:
        await trio.sleep(delay)
        await raw.handle_stream(stream)

    raw.host.set_stream_handler(TProtocol(KAD), late)


async def late_on_signal(servers: list[Node], delay: float, *, task_status: Any) -> None:
    """On SIGUSR1, the servers answer `delay` seconds late (`answer_late`); then print `{"event": "late"}`."""
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        task_status.started()
        async for _ in signals:
            for node in servers:
                answer_late(node, delay)
            print(json.dumps({"event": "late"}), flush=True)
            return


def make_hostile(node: Node, sybils: list[Any]) -> None:
    """Keep no record sent; list the same Sybils for every key asked."""
    store = node.dht.kad.raw.provider_store
    store.add_provider = lambda key, info: None
    store.get_providers = lambda key: list(sybils)


async def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    root: Path = args.data_dir
    shared = bytes.fromhex(args.sybil_seed) if args.sybil_seed else None
    seeds = [
        hashlib.sha256(shared + bytes([i])).digest()[:SEED_BYTES] if shared else os.urandom(SEED_BYTES)
        for i in range(args.sybils)
    ]
    sybils = [PeerInfo(ID.from_base58(peer_id_of_seed(seed)), [Multiaddr(NOWHERE)]) for seed in seeds]
    near = bytes.fromhex(args.hostile_near) if args.hostile_near else None
    listen = (f"/ip4/{args.listen}/tcp/0",) if args.listen else LOOPBACK
    async with trio.open_nursery() as nursery:
        slots = trio.CapacityLimiter(OPENING)
        opened: dict[int, Node] = {}  # index -> server, in whatever order they opened

        async def server(i: int) -> None:
            where = root / f"s{i}"
            if near is not None or args.ground_near:
                write_seed(where, ground_seed(near or bytes.fromhex(args.ground_near), args.bits))
            config = NodeConfig(
                data_dir=where, gates=(args.gate,), listen=listen, dht_mode="server", record_ttl_s=300.0
            )
            async with slots:
                opened[i] = await nursery.start(serve, config, sybils if near is not None else None)

        async with trio.open_nursery() as opening:  # a few at once: each one's bootstrap asks the others
            for i in range(args.servers):
                opening.start_soon(server, i)
        servers = [opened[i] for i in range(args.servers)]
        providers: list[Node] = []
        for i in range(args.providers):  # after every server: their records go to the key's closest
            config = NodeConfig(
                data_dir=root / f"p{i}", gates=(args.gate,), listen=listen, record_ttl_s=300.0
            )
            node = await nursery.start(serve, config, None)
            node.host.set_handler(PROFILE, answer_profile(node), deadline=10.0)
            await node.dht.publish(advert(node, 300.0), [ComputeUnit.CPU_ONNX], gates=node.gates)
            providers.append(node)
        root_key = Shard(None, 0, 0).dht_key
        roots = {
            n.host.peer_id: await n.dht.kad.lookup_providers(root_key, EVERY_PROVIDER) for n in providers
        }
        if near is None and args.answer_delay:
            await nursery.start(late_on_signal, servers, args.answer_delay)
        ready = {
            "event": "ready",
            "servers": [n.host.peer_id for n in servers],
            "providers": [n.host.peer_id for n in providers],
            "sybils": [i.peer_id.to_base58() for i in sybils],
            "seconds": round(time.monotonic() - started, 2),
            "placed": {
                n.host.peer_id: {unit_name(u): shard.level for u, shard in n.dht.placed.items()}
                for n in providers
            },
            "root": {p: {"union": len(r.providers), "holds": r.holds} for p, r in roots.items()},
        }
        print(json.dumps(ready))
        sys.stdout.flush()


async def serve(config: NodeConfig, sybils: list[Any] | None, *, task_status: Any) -> None:
    """Open one node (hostile with `sybils`), hand it to the caller, serve until cancelled."""
    async with open_node(config, role="worker") as node:
        if sybils is not None:
            make_hostile(node, sybils)
        task_status.started(node)
        await trio.sleep_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--servers", type=int, default=0)
    parser.add_argument("--hostile-near", default="")
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--sybils", type=int, default=3)
    parser.add_argument("--providers", type=int, default=0)
    parser.add_argument("--ground-near", default="", help="honest servers' ids ground near this key (--bits)")
    parser.add_argument("--answer-delay", type=float, default=0.0, help="on SIGUSR1, kad answers this late")
    parser.add_argument("--sybil-seed", default="", help="hex: the same Sybils in every process given it")
    parser.add_argument("--listen", default="", help="an IPv4 address to listen on (loopback otherwise)")
    trio.run(main, parser.parse_args())
