"""The libp2p edge and composition root: host, DHT, streams, worker and scheduler runtimes, CLI.

Modules:
    host       the only libp2p importer (with kad): identity, Noise-only host, handler guards, relay
    kad        libp2p's kad-dht on /sark/kad/1.0.0, with its workarounds
    dht        advert keys, the advert validator, publishing and lookups
    wire       the seam to the pure protocol: a byte stream and a framed message channel
    swarm      composition of a node: open_node, the worker's advertising loop, reachability
    config     the node's one frozen configuration (file, environment, flags)
    errors     NodeError and its leaves
    events     structured event lines (`--events`)
    urls       which model URLs a worker may fetch (the SSRF policy)
    fetch      model downloads over checked addresses, capped and verified
    endpoints  a black-box model server's URL checked by the same policy, resolved to a pinned address
    identity   the persistent Ed25519 seed and peer id
    cache      the content-addressed model cache
    blob       /sark/blob/1.0.0: serving and fetching models peer to peer
    runner     the worker's task runner: priority queue, model acquisition, measurement, signing
    worker     the worker's side of /sark/negotiate/1.0.0: who may offer, what it takes, the lease
    outbox     the worker's signed results kept until acknowledged
    roles      composition of the worker role
    dispatch   the submitter's side of /sark/negotiate/1.0.0: one coroutine per task attempt
    discovery  finding workers: DHT adverts confirmed by a live /sark/profile answer
    submitter  the campaign loop: the scheduler's one owner, results verified and stored
    store      the submitter's SQLite campaign store
    models     pinning a campaign's models
    outputs    results.csv, results.json, report.html
    report     rendering report.html, Markdown and terminal tables
    campaign   composition of the submitter role: submit, resume, plan, the embedded swarm
    http       `sark-node serve`: the original orchestrator's REST API and a dashboard
    cli        the `sark-node` command line
"""

from __future__ import annotations

__all__: list[str] = []
