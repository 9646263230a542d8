"""The submitter role: running a campaign, from file to results, and writing what it produced.

The campaign language and its scheduling are `scheduler`'s (pure), and so are the rows and their
columns (`scheduler.results`, the results room); this package runs a campaign on the swarm: it
discovers workers, negotiates, verifies and stores results, and writes the files to disk.

Modules:
    run        the campaign-run seam: prepare, submit, resume, plan, open_submitter
    loop       the campaign loop: the scheduler's one owner; accepted results stored before they are acked
    verdict    a delivered result refused with its reason, or its derived record and the scheduler's event
    attempt    the submitter's side of /sark/negotiate/1.0.0: one coroutine per task attempt
    eventlines the event line each attempt's scheduler event makes (--events)
    fleet      a fleet job's seed, start instant and member deals; the /sark/clock/1.0.0 offset probe
    discovery  finding workers: DHT adverts confirmed by a live /sark/profile answer
    challenge  each new peer's claimed CPU and GPU speeds challenged (/sark/challenge/1.2.0, 1.1.0)
               before its first task; `measure` for `peers --challenge`
    store      the SQLite campaign store
    schema     the store's tables, and the columns an older store is given on open
    swarms     which swarm a campaign runs on: recorded at its start, gone back to on --resume
    models     pinning a campaign's models
    outputs    results.csv and results.json, then report.html (drawn by `node.report`; it never stops them)
    vetting    the campaign file, the files it names and its local models checked in a child

Callers import the module they need (`from node.submitter.run import ...`): the package root
imports nothing, so that a command loads only what it uses (libp2p, onnxruntime and matplotlib are slow
to import).
"""

from __future__ import annotations

__all__ = [
    "attempt",
    "challenge",
    "discovery",
    "eventlines",
    "fleet",
    "loop",
    "models",
    "outputs",
    "run",
    "schema",
    "store",
    "swarms",
    "verdict",
    "vetting",
]
