"""The libp2p edge: the only code under node/ that imports libp2p (host, relay, stream and kad).

Modules:
    host      our libp2p host: Noise-only, handler guards, per-peer caps, relay; the workarounds but kad's
    relay     circuit relay v2 as a gate runs it: small, short circuits; slots only for the allowlisted caller
    stream    libp2p streams as byte streams (EOF, errors) and the guards every inbound stream runs under
    addrs     multiaddr parsing, peer ids, the addresses we announce, the order to dial a peer's (no libp2p)
    dial      a peer's addresses dialled in turn, each but the last under a short deadline (no libp2p)
    kadpatch  libp2p's kad-dht on /sark/kad/1.0.0, patched (protocol id, TTLs, caps, server-only), opened
    kad       queries on the running kad-dht: direct asks, bounded keys, checked lookups, provides and puts
    kadwire   the kad messages we build and read ourselves: no signed peer record, refusals told apart
    walk      a GET_PROVIDERS walk towards a key's holders (a large swarm's lookups)
    closest   the servers closest to each key we announce, reused by refreshes (pure)
    dht       advert keys, the advert validator, publishing and provider lookups
    shards    sharded capability keys: a tree of keys per unit, spillover, the lookup's levels (pure)
    wire      the seam to the pure protocol: a byte stream and a framed message channel
    identity  the persistent Ed25519 seed and peer id (no libp2p or protocol import: `id` starts at once)
    gates     connecting to the gates at start-up: a worker retries with backoff, a command fails in one line
    node      open_node: a host connected to its gates with a bootstrapped DHT; worker lookups; reachability
    reach     /sark/reach/1.0.0 dial-backs (gates and workers) and the verdict a worker draws from them
    survey    why a lookup found no worker (reason codes for `peers` and `submit`)
    trim      leaves out libp2p's unused subsystems (QUIC, WebSocket, mDNS, UPnP, AutoTLS, metrics)

Callers import the module they need (`from node.p2p.host import ...`): the package root imports
only `trim` (light, and first: before any libp2p import), so that a command loads only what it
uses (libp2p, onnxruntime and matplotlib are slow to import).
"""

from __future__ import annotations

import node.p2p.trim  # first: libp2p is then imported without its unused subsystems

__all__ = [
    "addrs",
    "closest",
    "dht",
    "dial",
    "gates",
    "host",
    "identity",
    "kad",
    "kadpatch",
    "kadwire",
    "node",
    "reach",
    "relay",
    "shards",
    "stream",
    "survey",
    "trim",
    "walk",
    "wire",
]
