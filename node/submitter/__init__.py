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
    floors     a fleet's or timed closed loop's server measured by the submitter itself: the records' floor
    discovery  finding workers: DHT provider records, each confirmed by a live /sark/profile answer
    networks   a discovery round's suspect networks and the probe slots that serve their providers last
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

One campaign, from its file to its files
----------------------------------------

    campaign.yaml -> node/submitter/vetting.vet_local: `python -m node.intake --folder DIR` (a child with 3
         GiB of address space, 60 s CPU, 120 s wall) reads the files the campaign names (64 MiB each), runs
         scheduler.parse_campaign (YAML sized before it is built: no alias bombs) and inspects each local
         model with drivers.files.formats.check_model_file; it hands back one `node.intake.Answer` as
         JSON, the campaign or every problem (field, file, stage, cause or limit) -> exit 2 before any
         swarm starts. `serve` starts the same child (without --folder) through the same launcher,
         `run_intake`, and reads the same answer. The child starts
         isolated (node/isolation.py: `python -I`, the running package's folder appended to its path, an
         empty working directory, only PATH/HOME/TMPDIR/locale/LD_LIBRARY_PATH from the environment), so a
         `yaml.py` beside the campaign never runs; it writes `started` first, and one that never did is
         `ChildNotStarted` (exit 1; 503 under `serve`), not a limit
      -> node/submitter/models.pin_models (path: sha256 of the file; url: fetched once under the URL policy)
      -> node/submitter/run.start, once the submitter's node reached a gate (a submit that reached none
         stores nothing: nothing to resume): CampaignRecord in SQLite (its out folder absolute), a fresh
         Scheduler; `--resume` emits `resumed` with what it takes over (done, leases to reclaim, queued)
      -> discovery: DHT providers per capability key, each confirmed by a live /sark/profile answer, for
         5 s of its own (`node.p2p.looktime`; until `--wait-peers` N answered, up to 60 s;
         `--discover-timeout` sets either); none found: exit 1 with the cause (node/p2p/survey.py:
         gate_refused, no_provider, no_answer)
      -> Scheduler.handle(event, now) -> commands; placement keeps every rejection as a code + detail
      -> attempt.py: one /sark/negotiate stream per task attempt; each wire message becomes a scheduler
         event where it is read (OfferCommitted, OfferDeclined, ProgressReported, TaskFailedRemotely, ...)
      -> worker: admission (pure), model from cache, holders or submitter over /sark/blob (sha256 checked),
         drivers.measure in a spawned child -> signed Result -> outbox until acked
      -> loop: result verified, stored as it arrives -> results.csv / results.json / report.html

Endpoint jobs and their keys
----------------------------

Endpoint jobs (`endpoint:` instead of a model; `scheduler/language/endpoints.py`) skip pinning: each gets a
pseudo-`ModelRef` (the model id, size 0, a digest of the target, never the key) so placement, the scheduler
and the results treat it like a model. A `concurrency` or `request_rate` list expands into one job per
level. Placement and admission check a gray-box job against the served model ids in the profile
(`Misfit.NO_ENDPOINT`, `DeclineReason.NO_ENDPOINT`) instead of a compute unit; a black-box job fits any
worker. The submitter reads each `api_key_env` from its environment in the CLI (`node/cli/campaign.py`),
keeps the values in `SubmitOptions.keys` / `Identity.keys` (repr off), and `attempt.with_key` puts a key
only into the signed offer's spec; the campaign, the stored tasks, the results and the events carry only the
variable's name. `serve` reads a posted campaign's variables from its own environment
(`ServeOptions.key_source`, `http/vetting.endpoint_keys`; unset: a 400).

A campaign that comes back
--------------------------

A submitter back from a crash resumes from SQLite and reclaims leases; a worker redelivers unacked results.
The store records, per campaign, the swarm it runs on (its gates, or `embedded`) and the submitter process
running it (host, pid, process start time), both written by `run._run` and `serve` as they drive it
(`CampaignStore.claim`). `submit --resume` goes back to that swarm (`node/submitter/swarms.py`
`resume_config`): with no gate configured it uses the recorded gates, never an embedded swarm for a fleet
campaign; a gate from a config file or `SARK_GATES` that differs is exit 2 naming both; `--gate` on the
command line moves it. A campaign stored before the record: embedded when only this data folder's embedded
workers took its tasks, the configured gates otherwise, and with none configured exit 2 asking for `--gate`.
`status` shows the stored status (`running`, `finished`, `cancelled`: the loop took a cancel, `interrupted`,
`failed`), except `running (submitter gone)` for one stored `running` whose submitter's pid is gone or
belongs to a process started at another time, on this host (`CampaignRecord.shown_status`; another host's
process cannot be checked and reads `running`); `--json` carries the same words.
"""

from __future__ import annotations

__all__ = [
    "attempt",
    "challenge",
    "discovery",
    "eventlines",
    "fleet",
    "floors",
    "loop",
    "models",
    "networks",
    "outputs",
    "run",
    "schema",
    "store",
    "swarms",
    "verdict",
    "vetting",
]
