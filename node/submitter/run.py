"""The campaign-run seam: every command that starts, runs, resumes, plans or writes out a campaign.

`start` stores a new campaign, with its secret draw key (`fresh_key`), and its fresh scheduler;
`restore` rebuilds one from the store (its scheduler from the last snapshot, with the stored key);
`drive` runs a `CampaignLoop` over it on a submitter node; `write_out` writes results.csv, results.json
and report.html. `submit`, `resume` and `plan` compose them for the CLI; `serve` (node/http/state.py)
and `report` call the same pieces.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import trio

import scheduler as sch
from node.campaignfiles import read_prompt_files
from node.config import NodeConfig, swarm_of
from node.errors import CampaignInterrupted, ConfigError
from node.events import EventSink, quiet
from node.p2p.identity import identity_peer_id, load_seed
from node.p2p.node import Node, open_node
from node.p2p.survey import Shortfall
from node.submitter.attempt import Identity, open_negotiate
from node.submitter.challenge import Challenger, open_challenge, rechallenge_s, wants_challenge
from node.submitter.discovery import Discovery, DiscoveryConfig, lookup_count
from node.submitter.fleet import FleetBook, open_clock
from node.submitter.loop import CampaignLoop, Tally, View
from node.submitter.models import models_json, pin_models, refs_from_json
from node.submitter.outputs import Sealer, bundle_body, campaign_report, model_costs, write_files
from node.submitter.store import CampaignRecord, CampaignStatus, CampaignStore, Submitter, utc_now
from node.submitter.swarms import resume_config
from node.submitter.vetting import vet_local
from node.transfer.blob import UploadSlots, blob_handler
from node.transfer.cache import ModelCache, model_cache
from node.transfer.urls import url_policy
from protocol import BLOB, ModelRef, peer_id_from_public_key, public_key_of

log = logging.getLogger(__name__)

SUBMITTER_UPLOAD_PEERS = 1
"""How many workers fetch models from the submitter at once; the rest fetch from workers that have it."""
BLOB_DEADLINE_S = 1800.0
"""How long one /sark/blob stream may take (a 2 GiB model at a slow link; resumable if cut)."""


LocalSwarm = Callable[[NodeConfig], AbstractAsyncContextManager[NodeConfig]]
"""Starts a swarm on this machine; yields the configuration pointed at its gate (the CLI's embedded one)."""


class CampaignNotFound(ConfigError):
    """`--resume` named a campaign this node's store never saw (bad input)."""

    def __init__(self, campaign_id: str, data_dir: Path) -> None:
        super().__init__("--resume", f"no campaign {campaign_id} in {data_dir}")


@dataclass(frozen=True)
class SubmitOptions:
    """What `sark-node submit` was asked to do, beyond the node's configuration."""

    out_root: Path = Path("sark-results")
    events: EventSink = quiet
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    swarm: LocalSwarm | None = None
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # api_key_env -> value, memory only
    stop: trio.Event | None = None
    """Set on Ctrl-C: the campaign withdraws what is out and raises `CampaignInterrupted`."""
    resume_flags: str = ""
    """The node flags to repeat in `CampaignInterrupted`'s resume command (" --data-dir D", ...)."""
    gate_given: bool = False
    """`--gate` was on the command line: `resume` runs the campaign there, whatever swarm it ran on."""
    workers: int = 0
    """`--workers`: the embedded swarm's workers, when it runs one (no gate): discovery waits for them
    (`running_workers`)."""


@dataclass(frozen=True)
class Outcome:
    """Where a finished campaign's files are, and what happened on the way."""

    campaign_id: str
    files: dict[str, Path]
    report: sch.CampaignReport
    """What the files hold, as the one typed value they were written from."""
    tasks: tuple[sch.TaskView, ...]
    tally: Tally
    medians: dict[str, float]
    no_workers: Shortfall | None = None
    """Why the first discovery found no worker, when it found none."""


@dataclass(frozen=True)
class CampaignRun:
    """One campaign as a submitter holds it: the stored record, the parsed file and its scheduler."""

    record: CampaignRecord
    campaign: sch.Campaign
    scheduler: sch.Scheduler

    @property
    def campaign_id(self) -> str:
        """The campaign's id."""
        return self.record.campaign_id


def store_of(config: NodeConfig) -> CampaignStore:
    """The submitter's campaign store under its data directory."""
    return CampaignStore(config.data_dir / "campaigns.sqlite")


def new_campaign_id() -> str:
    """A fresh campaign id in the seeds' shape (campaign-<digits>)."""
    return f"campaign-{int(time.time())}{secrets.randbelow(10_000):04d}"


async def prepare(
    config: NodeConfig, text: str, source: Path, vetted: sch.Campaign | None = None
) -> tuple[sch.Campaign, dict[str, ModelRef]]:
    """Validate the campaign file with the files it names and its local models, in a child (`vet_local`;
    `vetted`: the caller did), then pin its models (CampaignError / ModelSourceError on bad input)."""
    campaign = vetted if vetted is not None else await vet_local(text, source)
    models = await pin_models(campaign, source.parent, model_cache(config), url_policy(config))
    return campaign, models


@dataclass(frozen=True)
class NewCampaign:
    """A validated campaign with its models pinned, ready to `start`."""

    campaign: sch.Campaign
    models: dict[str, ModelRef]
    text: str
    source: str


def fresh_key() -> sch.DrawKey:
    """A new campaign's secret draw key: random bytes, kept in the store, never sent."""
    return sch.DrawKey(secrets.token_bytes(sch.SECRET_BYTES))


def start(store: CampaignStore, new: NewCampaign, out_root: Path) -> CampaignRun:
    """Store a new campaign (a fresh id and key, results under `out_root/<id>`, kept as an absolute path
    so that `report` and `--resume` from another folder write beside the same files) with a fresh
    scheduler."""
    campaign_id = new_campaign_id()
    key = fresh_key()
    record = CampaignRecord(
        campaign_id=campaign_id,
        name=new.campaign.name,
        created_utc=utc_now(),
        source=new.source,
        text=new.text,
        models=models_json(new.models),
        snapshot=None,
        status=CampaignStatus.RUNNING,
        out_dir=str((out_root / campaign_id).absolute()),
        secret=key.secret,
    )
    store.add_campaign(record)
    scheduler = sch.Scheduler(campaign_id, new.campaign, new.models, key=key)
    return CampaignRun(record, new.campaign, scheduler)


def restore(record: CampaignRecord) -> CampaignRun:
    """A stored campaign with its scheduler as last saved (a fresh one if it never got a snapshot).

    The snapshot holds the campaign as it was parsed then: the stored text is parsed only when there
    is no snapshot, so a stricter parser never locks an old campaign out. A campaign stored before
    keys were kept gets a fresh one (`resume` stores it first, so its later resumes draw alike).
    """
    key = sch.DrawKey(record.secret) if record.secret is not None else fresh_key()
    if record.snapshot is None:
        files = read_prompt_files(record.text, Path(record.source).parent)
        campaign = sch.parse_campaign(record.text, source=record.source, files=files)
        scheduler = sch.Scheduler(record.campaign_id, campaign, refs_from_json(record.models), key=key)
        return CampaignRun(record, campaign, scheduler)
    snapshot = sch.SchedulerSnapshot.model_validate_json(record.snapshot)
    return CampaignRun(record, snapshot.campaign, sch.Scheduler.restore(snapshot, key))


def mark_failed(store: CampaignStore, run: CampaignRun) -> None:
    """Record that the campaign's loop stopped on an internal error, with the scheduler as it stood."""
    snapshot = run.scheduler.snapshot().model_dump_json().encode()
    store.save_state(run.campaign_id, snapshot, CampaignStatus.FAILED)


async def drive(
    node: Node,
    run: CampaignRun,
    store: CampaignStore,
    discovery: Discovery,
    *,
    events: EventSink = quiet,
    view: View = lambda _: None,
    keys: Mapping[str, str] | None = None,
    stop: trio.Event | None = None,
) -> Tally:
    """Run the campaign's loop on `node` until the scheduler finishes (or the caller cancels; or `stop`
    is set: `CampaignInterrupted`)."""
    host = node.host
    key = sch.DrawKey(run.record.secret) if run.record.secret is not None else fresh_key()
    loop = CampaignLoop(
        campaign_id=run.campaign_id,
        campaign=run.campaign,
        scheduler=run.scheduler,
        store=store,
        discovery=discovery,
        me=Identity(host.peer_id, host.private_key, tuple(host.addrs()), keys or {}),
        open_channel=lambda peer, addrs: open_negotiate(host, peer, addrs),
        view=view,
        events=events,
        stop=stop,
        fleet=FleetBook(run.campaign, lambda peer, addrs: open_clock(host, peer, addrs)),
        challenger=challenger(node, run.campaign, key, events, discovery.interval_s),
    )
    events("campaign", campaign=run.campaign_id, submitter=host.peer_id)
    await loop.run()
    return loop.tally


def write_out(
    run: CampaignRun, store: CampaignStore, private_key: bytes | None = None, models: ModelCache | None = None
) -> tuple[dict[str, Path], sch.CampaignReport]:
    """Write results.csv, results.json and report.html into the campaign's folder, and with the
    submitter's `private_key` bundle.json sealed by it; their paths, and the report they were
    written from (what `submit` shows: no file is read back). With the node's model cache (`models`),
    report.html draws a roofline from each ONNX model's counted FLOPs and bytes (`model_costs`)."""
    results = store.results(run.campaign_id)
    record = store.campaign(run.campaign_id)  # the swarm as claimed last (a resume may move it)
    swarm = record.swarm if record is not None and record.swarm is not None else ()
    report = campaign_report(run.scheduler, results, utc_now(), run.campaign_id, run.campaign, swarm)
    sealer = None
    if private_key is not None:
        submitter = peer_id_from_public_key(public_key_of(private_key))
        kept = (
            (r.task_id, store.offer(run.campaign_id, r.task_id, r.peer_id)) for r in results if r.envelope
        )
        offers = {task_id: spec for task_id, spec in kept if spec is not None}
        cid, text = run.campaign_id, run.record.text
        body = bundle_body(cid, run.campaign, run.scheduler, results, text, submitter, offers)
        sealer = Sealer(body, private_key)
    costs = model_costs(refs_from_json(run.record.models).values(), models) if models is not None else None
    return write_files(Path(run.record.out_dir), report, sealer, costs), report


async def submit(
    config: NodeConfig,
    source: Path,
    text: str,
    options: SubmitOptions,
    *,
    view: View = lambda _: None,
    vetted: sch.Campaign | None = None,
) -> Outcome:
    """Run a campaign (the text of the file at `source`; `vetted`: already checked) to its end.

    The campaign is stored only once the submitter's node is up (a gate answered): a submit that
    reached no gate leaves no campaign behind to show as running or to resume.
    """
    campaign, models = await prepare(config, text, source, vetted)
    store = store_of(config)
    new = NewCampaign(campaign, models, text, str(source))
    return await _run(config, options, store, lambda: start(store, new, options.out_root), view=view)


async def resume(
    config: NodeConfig, campaign_id: str, options: SubmitOptions, *, view: View = lambda _: None
) -> Outcome:
    """Pick a stored campaign up where the last submitter stopped, on the swarm it ran on
    (`node.submitter.swarms`): reclaim leases, go on."""
    store = store_of(config)
    record = store.campaign(campaign_id)
    if record is None:
        raise CampaignNotFound(campaign_id, config.data_dir)
    if record.secret is None:  # stored before keys were kept: keep one now, for every later resume
        store.keep_secret(campaign_id, fresh_key().secret)
        record = store.campaign(campaign_id) or record
    run = restore(record)
    if run.scheduler.done:  # it ended, but its files were not written (a full disk): write them only
        return _outcome(run, store, Tally(), None, _own_key(config), model_cache(config))
    peers = {t.peer_id for t in run.scheduler.tasks() if t.peer_id}
    config = resume_config(record, config, peers, explicit=options.gate_given)

    def begin() -> CampaignRun:  # once the node is up: what this resume takes over, counted
        options.events("resumed", campaign=run.campaign_id, **resumed_counts(run.scheduler.tasks()))
        return run

    return await _run(config, options, store, begin, view=view)


def resumed_counts(tasks: Iterable[sch.TaskView]) -> dict[str, int]:
    """What a resume takes over: tasks already done, leases to reclaim from their workers, offers
    sent again, tasks queued again, and tasks that had already ended otherwise (failed, cancelled,
    unschedulable, unverifiable)."""
    states = Counter(t.state for t in tasks)
    done, live = sch.TaskState.DONE, (sch.TaskState.LEASED, sch.TaskState.OFFERED, sch.TaskState.PENDING)
    ended = sum(n for s, n in states.items() if s != done and s not in live)
    return {
        "done": states[sch.TaskState.DONE],
        "reclaiming": states[sch.TaskState.LEASED],
        "reoffered": states[sch.TaskState.OFFERED],
        "requeued": states[sch.TaskState.PENDING],
        "ended": ended,
    }


async def _run(
    config: NodeConfig,
    options: SubmitOptions,
    store: CampaignStore,
    begin: Callable[[], CampaignRun],
    *,
    view: View,
) -> Outcome:
    """Open the submitter's node, then `begin` the campaign (store or restore it) and drive it."""
    uploads = UploadSlots(SUBMITTER_UPLOAD_PEERS)
    async with open_submitter(config, options, uploads) as node:
        run = begin()
        private_key = node.host.private_key  # seals the campaign's bundle.json
        store.claim(
            run.campaign_id, swarm_of(config), Submitter.this_process()
        )  # `status`, `--resume` read it
        own = running_workers(node.config, options.workers) if not config.gates else frozenset()
        discovery = _discovery(node, options, run.campaign, own)
        try:
            tally = await drive(
                node,
                run,
                store,
                discovery,
                events=options.events,
                view=view,
                keys=options.keys,
                stop=options.stop,
            )
        except CampaignInterrupted as exc:  # the resume command, with the flags this one was given
            raise CampaignInterrupted(exc.campaign_id, options.resume_flags) from None
    options.events("uploads", campaign=run.campaign_id, bytes=uploads.served_bytes)
    return _outcome(run, store, tally, discovery.empty_cause, private_key, model_cache(config))


def _discovery(
    node: Node, options: SubmitOptions, campaign: sch.Campaign, own: frozenset[str] = frozenset()
) -> Discovery:
    """The campaign's discovery: its lookups stop at the workers it needs (`lookup_count`, at least
    `--wait-peers`; issue 43), each round counting only workers it has not confirmed yet, so a later
    round (the churn's rediscovery) still sees a worker that joined mid-campaign."""
    count = lookup_count(campaign)
    if count is not None:
        count = max(count, options.discovery.want or 0)
    config = dataclasses.replace(options.discovery, count=count)
    return Discovery(node, config, exclude=frozenset({node.host.peer_id}), own=own)


def challenger(
    node: Node, campaign: sch.Campaign, key: sch.DrawKey, events: EventSink, interval_s: float
) -> Challenger | None:
    """The campaign's challenger (`node.submitter.challenge`), when its `verify:` asks for one; this
    submitter's own embedded workers are not challenged (`own_workers`); a refused peer is challenged
    again `RECHALLENGE_ROUNDS` rediscovery intervals (`interval_s`) later."""
    if not wants_challenge(campaign):
        return None
    host = node.host
    again = rechallenge_s(interval_s)
    return Challenger(key, partial(open_challenge, host), events, own=own_workers(node.config), again_s=again)


def own_workers(config: NodeConfig) -> frozenset[str]:
    """The peer ids of this submitter's embedded workers (`submit --workers N`): their keys are in its
    own data folder, and they run in its own process, their profile its own probe's (one calibration
    taken by the submitter itself). What a challenge would prove of them (that the device is as fast
    as its profile says) the submitter measured itself; they still agree as replicas or not, and are
    spot-checked, like any peer. The cheater's view: a peer chooses its key, but not one whose secret
    is in this folder; its id is authenticated by the connection's handshake, so no other peer is
    taken for one of these, and a worker of another machine is challenged as ever."""
    return frozenset(identity_peer_id(key) for key in config.data.embedded_keys("worker-"))


def running_workers(config: NodeConfig, workers: int) -> frozenset[str]:
    """The peer ids of the `workers` embedded workers this run started (`worker-0` ...): discovery
    waits for them (`Discovery`'s `own`); keys of an earlier run's further workers are not waited for."""
    keys = (config.data.embedded(f"worker-{i}") / "identity.key" for i in range(workers))
    return frozenset(identity_peer_id(key) for key in keys)


def _own_key(config: NodeConfig) -> bytes | None:
    """This node's identity seed, to seal a bundle without starting the node (None: it has none yet;
    never created here)."""
    key_file = config.key_file()
    return load_seed(key_file) if key_file.is_file() else None


def _outcome(
    run: CampaignRun,
    store: CampaignStore,
    tally: Tally,
    shortfall: Shortfall | None,
    private_key: bytes | None = None,
    models: ModelCache | None = None,
) -> Outcome:
    """Write the ended campaign's files (`DiskFull` when its folder's disk is full; bundle.json sealed
    with `private_key`, the submitter node's) and sum it up."""
    files, report = write_out(run, store, private_key, models)
    medians = {  # each accepted result's median of its derived measurement, as the scheduler heard it
        t.task_id: t.progress.median_ms for t in run.scheduler.tasks() if t.progress.median_ms is not None
    }
    return Outcome(run.campaign_id, files, report, tuple(run.scheduler.tasks()), tally, medians, shortfall)


@asynccontextmanager
async def open_submitter(
    config: NodeConfig, options: SubmitOptions, uploads: UploadSlots | None = None
) -> AsyncIterator[Node]:
    """The submitter's node; with no gate configured, the options' local swarm (a gate and workers) first.

    It serves the campaign's models over /sark/blob through `uploads` (by default to one peer at a
    time: the submitter seeds, the workers that have the model spread it).
    """
    uploads = uploads or UploadSlots(SUBMITTER_UPLOAD_PEERS)
    async with AsyncExitStack() as stack:
        if not config.gates:
            if options.swarm is None:
                raise ConfigError("--gate", "no gate configured and no local swarm to start")
            config = await stack.enter_async_context(options.swarm(config))
        node = await stack.enter_async_context(open_node(config, role="submitter"))
        handler = blob_handler(model_cache(config), is_relayed=node.host.is_relayed, slots=uploads)
        node.host.set_handler(BLOB, handler, deadline=BLOB_DEADLINE_S)
        yield node


async def plan(
    config: NodeConfig, source: Path, text: str, options: SubmitOptions, vetted: sch.Campaign | None = None
) -> sch.Plan:
    """A dry run: which peers each job would go to, and why every other peer would not. Sends nothing."""
    campaign = vetted if vetted is not None else await vet_local(text, source)
    models = await pin_models(campaign, source.parent, model_cache(config), url_policy(config), fetch=False)
    async with open_submitter(config, options) as node:
        own = running_workers(node.config, options.workers) if not config.gates else frozenset()
        discovery = _discovery(node, options, campaign, own)
        peers = await discovery.initial()
        challenges = challenger(node, campaign, fresh_key(), options.events, discovery.interval_s)  # own key
        if challenges is not None:
            peers = tuple(await challenges.vouch(peers, discovery.addrs))
    return sch.explain(campaign, models, peers)
