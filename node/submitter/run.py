"""Composition of the submitter role: campaign file in, results out.

`submit` pins the models, starts an embedded local swarm when no gate is given, opens the submitter
node (which also serves the pinned models over /sark/blob), runs the campaign loop and writes
results.csv, results.json and report.html. `resume` picks a stored campaign up where it stopped.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import scheduler as sch
from node.config import NodeConfig
from node.errors import ConfigError
from node.events import EventSink, quiet
from node.p2p.node import Node, open_node
from node.submitter.attempt import Identity, open_negotiate
from node.submitter.discovery import Discovery, DiscoveryConfig
from node.submitter.loop import CampaignLoop, Tally, View, models_json, utc_now
from node.submitter.models import pin_models, refs_from_json
from node.submitter.outputs import write_outputs
from node.submitter.store import CampaignRecord, CampaignStore
from node.transfer.blob import UploadSlots, blob_handler
from node.transfer.cache import model_cache
from node.transfer.urls import url_policy
from protocol import BLOB, ModelRef

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


@dataclass(frozen=True)
class Outcome:
    """Where a finished campaign's files are, and what happened on the way."""

    campaign_id: str
    files: dict[str, Path]
    tasks: tuple[sch.TaskView, ...]
    tally: Tally
    medians: dict[str, float]


def store_of(config: NodeConfig) -> CampaignStore:
    """The submitter's campaign store under its data directory."""
    return CampaignStore(config.data_dir / "campaigns.sqlite")


def new_campaign_id() -> str:
    """A fresh campaign id in the seeds' shape (campaign-<digits>)."""
    return f"campaign-{int(time.time())}{secrets.randbelow(10_000):04d}"


async def prepare(config: NodeConfig, text: str, source: Path) -> tuple[sch.Campaign, dict[str, ModelRef]]:
    """Validate the campaign file and pin its models (CampaignError / ModelSourceError on bad input)."""
    campaign = sch.parse_campaign(text, source=str(source))
    models = await pin_models(campaign, source.parent, model_cache(config), url_policy(config))
    return campaign, models


async def submit(
    config: NodeConfig, source: Path, text: str, options: SubmitOptions, *, view: View = lambda _: None
) -> Outcome:
    """Run a campaign (the text of the file at `source`) to its end."""
    campaign, models = await prepare(config, text, source)
    campaign_id = new_campaign_id()
    out_dir = options.out_root / campaign_id
    store = store_of(config)
    record = CampaignRecord(
        campaign_id,
        campaign.name,
        utc_now(),
        str(source),
        text,
        models_json(models),
        None,
        "running",
        str(out_dir),
    )
    store.add_campaign(record)
    scheduler = sch.Scheduler(campaign_id, campaign, models)
    return await _run(config, options, store, record, campaign, scheduler, view=view)


async def resume(
    config: NodeConfig, campaign_id: str, options: SubmitOptions, *, view: View = lambda _: None
) -> Outcome:
    """Pick a stored campaign up where the last submitter stopped: reclaim leases, go on."""
    store = store_of(config)
    record = store.campaign(campaign_id)
    if record is None:
        raise CampaignNotFound(campaign_id, config.data_dir)
    campaign = sch.parse_campaign(record.text, source=record.source)
    models = refs_from_json(record.models)
    if record.snapshot is None:
        scheduler = sch.Scheduler(campaign_id, campaign, models)
    else:
        scheduler = sch.Scheduler.restore(sch.SchedulerSnapshot.model_validate_json(record.snapshot))
    return await _run(config, options, store, record, campaign, scheduler, view=view)


async def _run(
    config: NodeConfig,
    options: SubmitOptions,
    store: CampaignStore,
    record: CampaignRecord,
    campaign: sch.Campaign,
    scheduler: sch.Scheduler,
    *,
    view: View,
) -> Outcome:
    uploads = UploadSlots(SUBMITTER_UPLOAD_PEERS)
    async with open_submitter(config, options, uploads) as node:
        me = Identity(node.host.peer_id, node.host.private_key, tuple(node.host.addrs()))
        discovery = Discovery(node, options.discovery, exclude=frozenset({node.host.peer_id}))
        loop = CampaignLoop(
            campaign_id=record.campaign_id,
            scheduler=scheduler,
            store=store,
            discovery=discovery,
            me=me,
            open_channel=lambda peer, addrs: open_negotiate(node.host, peer, addrs),
            view=view,
            events=options.events,
        )
        options.events("campaign", campaign=record.campaign_id, submitter=node.host.peer_id)
        await loop.run()
    options.events("uploads", campaign=record.campaign_id, bytes=uploads.served_bytes)
    results = store.results(record.campaign_id)
    files = write_outputs(Path(record.out_dir), record.campaign_id, campaign, scheduler, results, utc_now())
    medians = {
        r.task_id: float(r.row["InferenceMsMedian"]) for r in results if r.row.get("InferenceMsMedian")
    }
    return Outcome(record.campaign_id, files, tuple(scheduler.tasks()), loop.tally, medians)


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


async def plan(config: NodeConfig, source: Path, text: str, options: SubmitOptions) -> sch.Plan:
    """A dry run: which peers each job would go to, and why every other peer would not. Sends nothing."""
    campaign = sch.parse_campaign(text, source=str(source))
    models = await pin_models(campaign, source.parent, model_cache(config), url_policy(config), fetch=False)
    async with open_submitter(config, options) as node:
        discovery = Discovery(node, options.discovery, exclude=frozenset({node.host.peer_id}))
        peers = await discovery.initial()
    return sch.explain(campaign, models, peers)
