"""The worker role: advertising, the negotiation it answers, the task runner and its outbox.

Modules:
    role         open_worker: composition of the worker role (cache, runner, negotiator, advertising)
    advertising  the signed advert in the DHT, /sark/profile, relay slots, gates that come back
    negotiator   the worker's side of /sark/negotiate/1.0.0: who may offer, what it takes, the lease
    admission    pure: whether the worker takes an authenticated offer (offer, profile, policy, load)
    runner       the task runner: priority queue, model acquisition, measurement
    job          one committed task and its signed outcomes: a result cut to fit, a failure, a release
    fit          a result cut (and the cuts declared) until it fits one signed envelope
    holders      a model from the other workers that hold it, the submitter last (who to ask when)
    outbox       signed results kept on disk until acknowledged
    leave        the graceful leave on SIGTERM/SIGINT: no offers, leases handed back, advert withdrawn
    targets      where an endpoint task's requests go: a declared server, or a campaign URL once checked
    clock        /sark/clock/1.0.0: the worker's wall clock for a fleet job's offset probe
    challenge    /sark/challenge/1.2.0 and 1.1.0: a submitter's drawn chain (on the CPU, on a GPU), run
                 and committed in a spawned child

Callers import the module they need (`from node.worker.role import ...`): the package root
imports nothing, so that a command loads only what it uses (libp2p, onnxruntime and matplotlib are slow
to import).
"""

from __future__ import annotations

__all__ = [
    "admission",
    "advertising",
    "challenge",
    "clock",
    "fit",
    "holders",
    "job",
    "leave",
    "negotiator",
    "outbox",
    "role",
    "runner",
    "targets",
]
