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

Uploads and measurements apart
------------------------------

A worker's measurement never overlaps a model upload it serves (`node/transfer/blob.py`
`UploadSlots.measuring`, entered by `runner.py` around the whole child run: load, warm-up, timed runs). From
the moment a task is about to measure, every `/sark/blob` request to that worker is answered `busy` with
`measuring=True`; an upload already streaming is waited for (up to `DRAIN_S`, 30 s), and one still running
then is cut (reset), so the measurement starts only once no upload streams. A cut fetcher keeps the prefix
it has and resumes it elsewhere; a fetcher told `measuring` does not wait for that holder
(`node/worker/holders.py`): it asks the other holders and the submitter in the same round, while a plain
`busy` (the holder is spreading the model) is waited for. The worker's event lines record both intervals:
`upload` (started, ended, cut) from the blob handler and `measured` (started, ended) from the runner
(`tests/labs/swarm/test_upload_exclusion.py`). The submitter's own serving is not a worker's and is not
paused.
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
