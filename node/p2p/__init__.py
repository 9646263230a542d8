"""The libp2p edge: the only code under node/ that imports libp2p (host, relay, stream and kad).

Modules:
    host      our libp2p host: Noise-only, handler guards, per-peer caps, relay; the workarounds but kad's
    addresscap  inbound connections from one address bounded (a stranger's machine cannot fill a host)
    relay     circuit relay v2 as a gate runs it: small, short circuits; slots only for the allowlisted caller
    stream    libp2p streams as byte streams (EOF, errors) and the guards every inbound stream runs under
    addrs     multiaddr parsing, peer ids, the addresses we announce, the order to dial a peer's (no libp2p)
    dial      a peer's addresses dialled in turn, each but the last under a short deadline (no libp2p)
    kadpatch  libp2p's kad-dht on /sark/kad/1.0.0, patched (protocol id, TTLs, caps, server-only), opened
    kad       queries on the running kad-dht: direct asks, bounded keys, checked lookups, provides and puts
    kadlink   one kad request to one server and its answer (a few streams a server, a broken connection
              dialled again once, the network it reached), and the k closest known asked at once
    kadwire   the kad messages we build and read ourselves: no signed peer record, refusals told apart
    lazy      a request stream whose protocol is negotiated in the request's own flight (one round trip)
    pacing    our ADD_PROVIDERs to each server paced to the rate a py-libp2p server keeps (P34; pure)
    places    a kad server keeps a few records of a key from one network (/24, /48): Sybils (pure)
    shortlist a walk's rules and state: whom to ask next, when it is over, what a key keeps (pure)
    walk      a GET_PROVIDERS walk towards a key's holders over the network (a large swarm's lookups)
    looktime  a look's seconds: those the machine kept the process waiting for a CPU given back (no libp2p)
    closest   the servers closest to each key we announce, reused by refreshes (pure)
    dht       advert keys, the advert validator, publishing; provider lookups (`Dht.lookup`)
    lookup    a lookup's read of a unit's tree of keys: levels, counts, digging, keys read again
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

Bounded streams
---------------

Bounded streams (`node/p2p/stream.py` `run_handler`, the one place an inbound stream of ours ends badly):
every protocol of ours opens with the caller's request, so the handler starts only once a whole first frame
arrived within `first_frame_s` (NodeConfig, 5 s; `Channel.await_first_frame` reads it ahead and hands it to
the handler's first read); silence, a drip, a bad length prefix, or any error the handler lets escape
(undecodable msgpack, an unknown kind, an illegal move, a peer gone or late) resets the stream. Handlers
never swallow these (the negotiator used to, and junk on `/sark/negotiate` lingered until the other side
gave up). libp2p's own kad handler waited for a request with no deadline while holding one of the server's
128 inbound tokens; `node/p2p/kad.py` hands it a `PacedStream`: each request within 5 s of the opening or of
the last answer, or reset.

The DHT, addresses, reachability and gates
------------------------------------------

DHT: provider records under sharded capability keys (issue 43, `node/p2p/shards.py`, pure): the multihash
(sha2-256, `0x12 0x20` + digest; as a CID, v1 raw: `shard_cid`) of `sark/cap/v2/<unit or
any>/<level>/<index>`, a binary tree per unit in which no key holds more than `SHARD_CAP` (20) providers. A
worker's path down a tree is the hash of its peer id; `Dht.publish` places it once at the first key of its
path not full (spillover: reads down, and again on read-back when others filled the key meanwhile; "full"
is the word of most of the key's holders' networks, `ProviderLookup.holds`, never the union of their
lists, which hostile servers near every key fill with Sybils: `Dht._place`), reads
that key back from its k closest servers (`Kad.provide_where_missing`: a walk that does not end at agreeing
holders, sending the record again to each that answered without it, until a server lists it), and from then
on only re-provides it (no read-back: a refresh costs the same at any fleet size; `Kad.provide` and
`Kad.put` send to the closest servers the last walk found, `node/p2p/closest.py`, with the servers of our
routing table nearer the key than the farthest kept (`ClosestServers.nearer`: a growing swarm's later
servers), walking again about every `REWALK_S` (`rewalk_every` of the refresh period), when fewer than
`MIN_KEPT` are left, or when a walk that found fewer than k sees more servers in our table than then:
workers began to serve), on a timer jittered by up to a quarter of the period
(`node/worker/advertising.py`). Server mode (`dht_mode`): by default ("auto") a worker a dial-back reached
becomes a DHT server once its any-worker key lies at level 3 or deeper (`shards.large_swarm`: more than
about 140 workers), after its publish (`kadpatch.become_server`: it pushes identify and walks for its own id
at once, so each server the walk asks admits it to its routing table, P32); "reachable": once reached; a
NAT'd worker never serves; a smaller swarm keeps the gates as its only servers. `publish` names the gates
that did not list us and `join` warns about each. A refresh's writes are our own messages
(`kad.add_provider_request`, `put_value_request`: no signed peer record, which py-libp2p attaches to every
request); the advert, a cache, goes to `ADVERT_COPIES` (5) of the closest servers, provider records to k;
our servers list peers in answers by id and addresses only (`kadpatch.answer_without_peer_records`). Records
live `record_ttl_s` (1,800 s), refreshed every third of it (jittered); the routing table is refreshed by one
walk for our own id every `kadpatch.ROUTING_REFRESH_S` (libp2p walks for every bucket). Our servers bound
each key (`Kad.bound_providers` with `provider_bound`: `SHARD_CAP` for sharded keys, `PROVIDERS_PER_KEY` for
the old ones; an expired record holds no place), and at most `places_per_network` (4) records of a key from
one network, the /24 or /48 of the connection the ADD_PROVIDER came over as the kernel gave it
(`node/p2p/places.py`, issue 50: 200 free keys on one network held the first three levels of the any-worker
tree; loopback and private addresses exempt unless the share is set; a refresh keeps its place).
`Dht.lookup` reads the levels that hold the count asked at once, then the children of full keys, and stops at
the count (`Kad.lookup_providers` cancels its asks once `count` providers are each listed by servers on more
networks than those still to answer, and keeps them in turns by network: a stranger's server that answers
first with 20 Sybils ends no read, `tests/labs/swarm/test_hostile_first.py`; with more than k servers in our
table it walks instead, `node/p2p/walk.py` over `node/p2p/shortlist.py`'s rules: alpha 13, the next server
drawn among the k closest known (the reads of a key spread over its holders), closer peers followed, a request
unanswered after `HOP_S` freeing its slot, a server whose request failed leaving the k closest, ending at the
count or when the k closest it knows that did not fail have been asked, never at holders that agree on a short
list (issue 50: hostile servers ground near a key); its state, `Shortlist`, is pure and the simulator's walk
runs it too); asked for all, or still short, it also reads the unit's old `sark/cap/v1/` key
(`capability_dht_key`) at the servers it knows, so a worker from before issue 43 is found; an old submitter
does not find new workers (version rule: submitters first).
`submitter.discovery.lookup_count` says what a campaign needs (2 x the most devices one plain CPU job needs,
replicas counted; every provider for `devices: all`, another unit or a requirement, at least `--wait-peers`)
and `submit`'s `Discovery` stops at it: each round counts only workers it has not confirmed yet
(`Hints.known`), so a later round reads past the known ones down to where joiners landed (the
churn lab), and doubles the count only when providers it was given did not answer. How it scales, today's
scheme beside it: `benchmarks/swarm_sim.py` (a seeded simulator over this code's keys, message sizes, TTLs
and refresh period). Adverts come from the worker itself over `/sark/profile` (at its provider addresses,
which carry a relayed worker's circuits, `Kad.circuits`; then through each of our gates as a relay).
`submit`'s discovery reads provider records alone (`Node.find_providers`) and that ask is its live
probe, so no advert is fetched from the DHT first and a provider that stalls holds a probe slot, never
the lookup;
signed values under `/sark/<40 hex>`, checked by a namespace validator
(signer = key owner, expiry, size; highest seq wins), are a cache on our own gates, never the only way.
Record lifetimes are minutes (30 by default). Addresses (`node/p2p/addrs.py`, P29): a host announces a
wildcard listen address (`0.0.0.0`, `::`) as the addresses of the machine's running interfaces on the bound
port, link-local left out, ranked public, private, loopback, plus the address a gate's dial-back reached it
at; libp2p's own observed addresses are off (they carry the ephemeral ports of our outbound connections).
The same list goes into adverts, provider records, identify and reach claims. An advert's addresses are the
peer's own claim, bounded at the edge: at most 16 direct and 8 circuit addresses, each a printable string of
at most 256 characters (`protocol.values.AdvertAddrs`, `AdvertCircuits`; a worker advertises its best-ranked
16); a longer list makes the advert invalid wherever it is read (the gate's validator, `/sark/profile`). The
dial rule (`node/p2p/dial.py` `dial_plan`): of a peer's direct addresses at most 3 are dialled per
connection attempt, first those where the peer was seen (`Sightings`, kept by the host: the address an
earlier connection was made at, and the first addresses of its DHT provider record; the address itself, then
its IP), then those on our own networks, then in the peer's order; then at most 2 circuits; each but the
last for at most 3 s. So an advert listing other services' addresses gets at most 2 of them a connection per
attempt (`tests/labs/e2e/test_decoy_addrs.py`). Reachability (`node/p2p/reach.py`): the dial-backs probe the
announced ports at the caller's observed IP only; "direct" only when a dial-back reached the worker (its
gates', or, when no gate serves `/sark/reach`, another sark worker's: every worker serves it from a
throwaway host) and it announces an address, "relayed" only when dial-backs were tried and failed, "unknown"
otherwise, checked again after 1 s, 2 s, 4 s, ... (up to the republish timer) and whenever a sark peer asks
us for a dial-back, while it stays so. `join` warns when no submitter can dial the worker
(`addrs.undialable`). Gates (`node/p2p/gates.py` `connect_gates`, from `open_node`): a worker tries its
gates in rounds until one answers, 1, 2, 4, 8, 15, then every 30 s apart, one WARNING line per round naming
each gate and the socket's cause (`gates.cause` digs it out of libp2p's wrapping), so a gate outage never
ends it; a command (`submit`, `plan`, `peers`, `serve`) tries three rounds quietly, then fails with one
line, `NoGateAnswered`. A round that joins some gates says in one line which it did not and why. A
worker holds connections to `GATE_LINKS` (3) of its gates, tried in a random order, the next when one is
full or silent; the rest are spares, and a gate lost later is replaced by the next that answers
(`gates.Links`, from `node/worker/advertising.py`; the spares of a worker short of gates tried again 1 s
to 30 s apart). A command connects to every gate it is given.
Connection caps (`host.py`, P33): a gate holds `GATE_CONNECTIONS` (2,048; `gate --max-connections`),
another node `NODE_CONNECTIONS` (512); the resource manager sits above the cap, so past it a new
connection is closed before its handshake, which the dialler names (`node.errors.ClosedAtHandshake`:
"a full gate"). A worker or a submitter (not a gate) closes idle connections past `PRUNE_FROM` (3/4)
of its cap down to `PRUNE_TO` (half), never its gates' (`Host.protect`) nor one with a stream open,
and makes that room before a dial of its own (`Host.make_room`, P42).
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
    "looktime",
    "lookup",
    "node",
    "places",
    "reach",
    "relay",
    "shards",
    "stream",
    "survey",
    "trim",
    "walk",
    "wire",
]
