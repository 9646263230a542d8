"""node.p2p.trim: libp2p's unused subsystems stay out of the process, and every feature the node uses
still works (TCP + Noise + yamux, identify, ping, kad-dht, circuit relay v2).

Both checks run in a fresh interpreter, which imports libp2p only through `node.p2p` (as every
command does), whatever this test process imported first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from node.p2p.trim import CUTS

ROOT = Path(__file__).resolve().parents[3]
# Packages each cut subsystem would load, and dnspython's optional transports (httpx2, h2, aioquic).
UNLOADED = (
    "aioquic",
    "service_identity",
    "OpenSSL",
    "zeroconf",
    "miniupnpc",
    "trio_websocket",
    "wsproto",
    "requests",
    "httpx",
    "httpx2",
    "httpcore2",
    "h2",
    "sqlite3",
)

IMPORTS = """
import json, sys
import node.p2p.host, node.p2p.kad, node.p2p.kadpatch, node.p2p.node, node.p2p.reach
left_out = lambda m: (getattr(m, "__doc__", "") or "").startswith("Left out by")
stubs = sorted(n for n, m in sys.modules.items() if left_out(m))
print(json.dumps({"modules": sorted(sys.modules), "stubs": stubs}))
"""

FEATURES = """
import sys, tempfile, trio
from pathlib import Path
from libp2p.host.ping import PingService
from libp2p.peer.id import ID
from node.p2p.host import HostConfig, open_host
from node.p2p.kadpatch import open_kad
from protocol import ProfileGet, ReachReply

ECHO = "/sark/test-echo/1.0.0"

async def echo(channel):
    await channel.receive()
    await channel.send(ReachReply(reachable=True))
    await channel.close()

async def ask(client, server, addrs):
    channel = await client.open_channel(server.peer_id, ECHO, addrs=addrs, timeout=10, read_timeout=10)
    await channel.send(ProfileGet())
    reply = await channel.receive()
    await channel.close()
    return reply.reachable

async def main():
    done = []
    tmp = Path(tempfile.mkdtemp())
    config = lambda name, **kw: HostConfig(key_file=tmp / name, **kw)
    async with open_host(config("gate", relay_hop=True)) as gate, open_host(config("a")) as a, \\
            open_host(config("b")) as b:
        a.set_handler(ECHO, echo)
        done.append(("tcp+noise+yamux", await ask(b, a, a.addrs())))
        with trio.fail_after(20):
            while ECHO not in b.raw.get_peerstore().get_protocols(ID.from_base58(a.peer_id)):
                await trio.sleep(0.05)
        done.append(("identify", True))
        rtts = await PingService(b.raw).ping(ID.from_base58(a.peer_id), ping_amt=3)
        done.append(("ping", len(rtts) == 3))
        circuit = await a.reserve_relay(gate.addrs()[0], timeout=20)
        await b.disconnect(a.peer_id)
        done.append(("relay-v2", await ask(b, a, [circuit]) and b.is_relayed(a.peer_id)))
        keep = lambda key, value: None
        first = lambda key, values: 0
        kad = lambda host: open_kad(host, "server", 60, keep, first)
        async with kad(gate), kad(a) as ka, kad(b) as kb:
            await a.connect(gate.addrs()[0])
            await ka.bootstrap([gate.peer_id])
            await kb.bootstrap([gate.peer_id])
            key = b"sark-trim-test-provider-key-0001"
            await ka.provide(key)
            with trio.fail_after(20):
                while a.peer_id not in await kb.find_providers(key):
                    await trio.sleep(0.1)
            done.append(("kad", True))
    print("\\n".join(f"{name} {ok}" for name, ok in done))

trio.run(main)
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_node_imports_libp2p_without_its_unused_subsystems() -> None:
    report = json.loads(_run(IMPORTS).strip().splitlines()[-1])
    loaded = set(report["modules"])
    assert "libp2p" in loaded  # the probe really imported libp2p
    assert sorted(name for name in loaded if name.split(".")[0] in UNLOADED) == []
    stubbed = {cut.prefix for cut in CUTS}
    assert {"libp2p.transport.quic.transport", "libp2p.discovery.mdns.mdns"} <= set(report["stubs"])
    assert {"prometheus_client", "libp2p.peer.persistent"} <= set(report["stubs"]) | stubbed
    assert "libp2p.transport.quic.config" in loaded  # kept for real: the swarm tests against it


def test_the_node_features_still_work_with_the_subsystems_left_out() -> None:
    results = dict(line.split() for line in _run(FEATURES).strip().splitlines())
    assert results == {name: "True" for name in ("tcp+noise+yamux", "identify", "ping", "relay-v2", "kad")}


def test_a_left_out_subsystem_fails_by_name_when_called() -> None:
    code = (
        "import node.p2p.trim\n"
        "from libp2p.transport.quic.transport import QUICTransport\n"
        "from libp2p.discovery.mdns.mdns import create_mdns_discovery\n"
        "for call in (lambda: QUICTransport(None), lambda: create_mdns_discovery(None)):\n"
        "    try:\n"
        "        call()\n"
        "    except node.p2p.trim.LeftOut as exc:\n"
        "        print(exc)\n"
    )
    lines = _run(code).strip().splitlines()
    assert len(lines) == 2
    assert "QUIC transport" in lines[0]
    assert "mDNS discovery" in lines[1]
    assert all("left out of sark-node" in line for line in lines)
