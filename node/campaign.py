"""Composition of the submitter role: campaign file in, results out.

`submit` pins the models, starts an embedded local swarm when no gate is given, opens the submitter
node (which also serves the pinned models over /sark/blob), runs the campaign loop and writes
results.csv, results.json and report.html. `resume` picks a stored campaign up where it stopped.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

import scheduler as sch
from node.blob import UploadSlots, blob_handler
from node.config import NodeConfig
from node.discovery import Discovery, DiscoveryConfig
from node.dispatch import Identity, open_negotiate
from node.errors import ConfigError
from node.events import EventSink, quiet
from node.models import pin_models, refs_from_json
from node.outputs import write_outputs
from node.prompts import read_prompt_files
from node.roles import model_cache, open_worker, url_policy
from node.store import CampaignRecord, CampaignStore
from node.submitter import CampaignLoop, Tally, View, models_json, utc_now
from node.swarm import Node, open_node
from protocol import BLOB, ModelRef

log = logging.getLogger(__name__)

SUBMITTER_UPLOAD_PEERS = 1
"""How many workers fetch models from the submitter at once; the rest fetch from workers that have it."""
BLOB_DEADLINE_S = 1800.0
"""How long one /sark/blob stream may take (a 2 GiB model at a slow link; resumable if cut)."""


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
    embedded_workers: int = 1


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
    campaign = sch.parse_campaign(text, source=str(source), files=read_prompt_files(text, source.parent))
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
    files = read_prompt_files(record.text, Path(record.source).parent)
    campaign = sch.parse_campaign(record.text, source=record.source, files=files)
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
    """The submitter's node; with no gate configured, an embedded gate and local workers first.

    It serves the campaign's models over /sark/blob through `uploads` (by default to one peer at a
    time: the submitter seeds, the workers that have the model spread it).
    """
    uploads = uploads or UploadSlots(SUBMITTER_UPLOAD_PEERS)
    async with AsyncExitStack() as stack:
        if not config.gates:
            config = await stack.enter_async_context(embedded_swarm(config, options.embedded_workers))
        node = await stack.enter_async_context(open_node(config, role="submitter"))
        handler = blob_handler(model_cache(config), is_relayed=node.host.is_relayed, slots=uploads)
        node.host.set_handler(BLOB, handler, deadline=BLOB_DEADLINE_S)
        yield node


@asynccontextmanager
async def embedded_swarm(config: NodeConfig, workers: int) -> AsyncIterator[NodeConfig]:
    """A gate and `workers` local workers on loopback that take offers from this submitter only.

    Yields the submitter's configuration pointed at the embedded gate.
    """
    from gate import serve_gate
    from node.identity import identity_peer_id

    me = identity_peer_id(config.key_file())
    root = config.data_dir / "embedded"
    loopback = ("/ip4/127.0.0.1/tcp/0",)
    gate_config = config.model_copy(update={"data_dir": root / "gate", "listen": loopback, "gates": ()})
    async with trio.open_nursery() as nursery:
        gates = tuple(await nursery.start(serve_gate, gate_config))
        async with AsyncExitStack() as stack:
            for i in range(workers):
                name = f"{config.device_name or 'local'}-{i}" if workers > 1 else config.device_name
                worker_config = config.model_copy(
                    update={
                        "data_dir": root / f"worker-{i}",
                        "listen": loopback,
                        "gates": gates,
                        "allow": (me,),
                        "open_mode": False,
                        "device_name": name,
                    }
                )
                await stack.enter_async_context(open_worker(worker_config))
            yield config.model_copy(update={"gates": gates, "listen": loopback})
        nursery.cancel_scope.cancel()


async def plan(config: NodeConfig, source: Path, text: str, options: SubmitOptions) -> sch.Plan:
    """A dry run: which peers each job would go to, and why every other peer would not. Sends nothing."""
    campaign = sch.parse_campaign(text, source=str(source), files=read_prompt_files(text, source.parent))
    models = await pin_models(campaign, source.parent, model_cache(config), url_policy(config), fetch=False)
    async with open_submitter(config, options) as node:
        discovery = Discovery(node, options.discovery, exclude=frozenset({node.host.peer_id}))
        peers = await discovery.initial()
    return sch.explain(campaign, models, peers)
