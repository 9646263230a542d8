"""A kad request on a new connection and on an open one: round trips and bytes, on real hosts (issue 50).

    .venv/bin/python benchmarks/conn_cost.py [--delays-ms 20,60] [--rounds 12]

Two nodes of this code in one process: a DHT server (`open_node`, role gate; its answer lists no
provider) and a client (role submitter, no gate). The client reaches the server only through delay
relays in this process (`tests/kit/delayrelay.py`: each holds every chunk its delay in each direction,
in order; this kernel has no netem), and each relay counts the bytes both ways (TCP payload: libp2p's
framing, Noise, yamux, multistream, kad; no TCP/IP headers).

Per round, at each relay, side by side:
- open: one GET_PROVIDERS (the node's own `KadLink.request`) on a connection already up;
- new: the connection closed first, then the same request: TCP's handshake, multistream for the
  security protocol, Noise XX, multistream for the muxer, then the stream and the request;
- negotiated, the baseline: the request on an open connection through py-libp2p's `new_stream`,
  which waits for multistream's two echoes before the request goes (`KadLink.request` before).
The round trips are the slope over the two relays, (time at the longer delay - time at the shorter) /
(the round trips' difference), so the hosts' own processing, which the delay does not change (and a
loaded machine lengthens), drops out; bytes: what crossed the longer delay's relay.

Writes benchmarks/out/conn_cost.json; `swarm_net`'s `OPEN_RTTS`, `CONNECT_RTTS` and `CONNECT_BYTES`
are its figures (benchmarks/notes/conn_cost.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

import trio  # noqa: E402
from kit.delayrelay import DelayRelay  # noqa: E402
from libp2p.custom_types import TProtocol  # noqa: E402
from libp2p.kad_dht.common import MAX_DHT_MESSAGE_SIZE  # noqa: E402
from libp2p.peer.id import ID  # noqa: E402
from libp2p.utils.varint import encode_uvarint, read_varint_prefixed_bytes_limited  # noqa: E402

from node.config import NodeConfig  # noqa: E402
from node.p2p.kadwire import get_providers_request  # noqa: E402
from node.p2p.node import open_node  # noqa: E402
from node.p2p.shards import Shard  # noqa: E402
from protocol import KAD  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
KINDS = ("new", "open", "negotiated")
"""negotiated: the baseline, the same request on an open connection through py-libp2p's `new_stream`
(it waits for multistream's echoes before the request goes), as `KadLink.request` sent it before."""


async def negotiated(raw_host: Any, peer: ID, request: bytes) -> bytes:
    """One kad request through libp2p's own negotiation, as `KadLink.request` sent it before."""
    stream = await raw_host.new_stream(peer, [TProtocol(KAD)])
    try:
        await stream.write(encode_uvarint(len(request)) + request)
        return bytes(await read_varint_prefixed_bytes_limited(stream, MAX_DHT_MESSAGE_SIZE))
    finally:
        await stream.close()


async def measure(delays_s: tuple[float, float], rounds: int) -> dict[str, Any]:
    """Each round: at each relay's delay, a request on a new connection and one on an open one."""
    key = Shard(None, 0, 0).dht_key
    rows: dict[str, list[dict[str, float]]] = {f"{kind}@{d * 1000:g}": [] for d in delays_s for kind in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server_config = NodeConfig(data_dir=root / "server", listen=LOOPBACK)
        client_config = NodeConfig(data_dir=root / "client", listen=LOOPBACK)
        async with (
            open_node(server_config, role="gate") as server,
            open_node(client_config, role="submitter") as me,
        ):
            port = int(server.host.addrs()[0].split("/tcp/")[1].split("/")[0])
            server_id = server.host.peer_id
            kad = me.kad or me.dht.kad
            peer = ID.from_base58(server_id)
            async with trio.open_nursery() as nursery:
                relays = [DelayRelay(port, d) for d in delays_s]
                for relay in relays:
                    await nursery.start(relay.serve)
                for _ in range(rounds):
                    for relay in relays:
                        addr = f"/ip4/127.0.0.1/tcp/{relay.port}/p2p/{server_id}"
                        for kind in KINDS:
                            await me.host.disconnect(server_id)
                            await trio.sleep(2 * relay.delay + 0.1)  # the close's frames have crossed
                            if kind != "new":
                                await me.host.connect(addr)
                                await trio.sleep(0.5)  # identify and its pushes are over
                            before, start = relay.bytes, time.perf_counter()
                            if kind == "new":
                                await me.host.connect(addr)
                            if kind == "negotiated":
                                await negotiated(me.host.raw, peer, get_providers_request(key))
                            else:
                                await kad.link.request(peer, get_providers_request(key))
                            took = time.perf_counter() - start
                            row = {"seconds": took, "bytes": relay.bytes - before}
                            rows[f"{kind}@{relay.delay * 1000:g}"].append(row)
                nursery.cancel_scope.cancel()

    def median(name: str, field: str) -> float:
        return statistics.median(r[field] for r in rows[name])

    short, long = (f"@{d * 1000:g}" for d in delays_s)
    span = 2 * (delays_s[1] - delays_s[0])  # the round trips' difference
    result: dict[str, Any] = {"delays_ms": [d * 1000 for d in delays_s], "rounds": rounds, "rows": rows}
    for kind in KINDS:
        result[kind] = {
            "round_trips": (median(kind + long, "seconds") - median(kind + short, "seconds")) / span,
            "bytes": median(kind + long, "bytes"),
            "seconds": {name: median(name, "seconds") for name in rows if name.startswith(kind)},
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delays-ms", default="20,60", help="the two relays' delay each way")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    low, high = (float(x) / 1000 for x in args.delays_ms.split(","))
    result = trio.run(measure, (low, high), args.rounds)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "conn_cost.json").write_text(json.dumps(result, indent=1))
    o, n, b = result["open"], result["new"], result["negotiated"]
    print(f"round trips 2 x {result['delays_ms']} ms through the relays, {result['rounds']} rounds, medians:")
    print(f"  open connection: {o['round_trips']:.2f} round trips, {o['bytes']:.0f} bytes; s {o['seconds']}")
    print(f"  new connection:  {n['round_trips']:.2f} round trips, {n['bytes']:.0f} bytes; s {n['seconds']}")
    print(
        f"  open, libp2p's negotiation (the baseline): {b['round_trips']:.2f} round trips, {b['bytes']:.0f} B"
    )
    print(f"  a new connection adds {n['round_trips'] - o['round_trips']:.2f} round trips and "
          f"{n['bytes'] - o['bytes']:.0f} bytes")  # fmt: skip


if __name__ == "__main__":
    main()
