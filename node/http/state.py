"""What `sark-node serve` knows and runs: the swarm's peers as discovery sees them, and campaigns.

One submitter node, one campaign store. A background task asks the swarm for its live workers every
`refresh_s`; each campaign posted over HTTP runs its own `CampaignLoop` (the same scheduler as
`submit`) in the state's nursery, several at once, and writes its files when it ends.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import final

import trio

import scheduler as sch
from node.campaign import SubmitOptions, new_campaign_id, open_submitter, store_of
from node.config import NodeConfig
from node.discovery import Discovery, DiscoveryConfig
from node.dispatch import Identity, open_negotiate
from node.events import EventSink, quiet
from node.fetch import FetchError
from node.http.errors import BadRequest
from node.http.vetting import (
    MAX_VETTING,
    Vetted,
    local_path_problems,
    refusal_problem,
    url_problems,
    vet_campaign,
)
from node.models import pin_models, refs_from_json
from node.outputs import campaign_rows, write_outputs
from node.roles import model_cache, url_policy
from node.store import CampaignRecord, CampaignStore, ResultRecord
from node.submitter import CampaignLoop, models_json, utc_now
from node.swarm import Node
from node.urls import UrlPolicy
from protocol import ModelRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    """How `serve` runs, beyond the node's configuration.

    Attributes:
        results_dir: where campaign folders and the seeds' flat CSV files go.
        events: where event lines go.
        discovery: how each campaign looks for workers.
        refresh_s: how often the peer view is refreshed.
        stale_after_s: a peer unseen for this long is reported "faulty".
        embedded_workers: local workers in the embedded swarm (no gate configured).
        allowed_hosts: Host names served besides the bound address (``--allowed-host``).
        allow_origins: web origins whose pages may call the API (``--allow-origin``).
    """

    results_dir: Path = Path("sark-results")
    events: EventSink = quiet
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    refresh_s: float = 2.0
    stale_after_s: float = 30.0
    embedded_workers: int = 1
    allowed_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()


@dataclass
class Seen:
    """A peer as the last discovery round that found it saw it."""

    view: sch.PeerView
    addrs: tuple[str, ...]
    last_seen: float
    fresh: bool = True


@dataclass
class Live:
    """A campaign this server is running."""

    record: CampaignRecord
    campaign: sch.Campaign
    scheduler: sch.Scheduler
    scope: trio.CancelScope
    files: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class CampaignState:
    """One campaign as the API reports it, live or stored."""

    record: CampaignRecord
    campaign: sch.Campaign
    tasks: tuple[sch.TaskView, ...]
    running: bool


@final
class ApiState:
    """The serving node's view of the swarm and its campaigns. Only trio tasks of one run touch it."""

    def __init__(self, node: Node, config: NodeConfig, options: ServeOptions, nursery: trio.Nursery) -> None:
        self.node = node
        self.config = config
        self.options = options
        self.store: CampaignStore = store_of(config)
        self.started = time.time()
        self.rounds = 0
        self.peers: dict[str, Seen] = {}
        self.live: dict[str, Live] = {}
        self._nursery = nursery
        self._vetting = trio.CapacityLimiter(MAX_VETTING)
        self._discovery = Discovery(node, options.discovery, exclude=frozenset({node.host.peer_id}))
        options.results_dir.mkdir(parents=True, exist_ok=True)

    # -- peers -----------------------------------------------------------------------------------

    async def watch_peers(self) -> None:
        """Refresh the peer view every `refresh_s`, forever."""
        while True:
            await self.refresh_peers()
            await trio.sleep(self.options.refresh_s)

    async def refresh_peers(self) -> None:
        """One discovery round: peers that answered are fresh, the others keep their last sighting."""
        views = await self._discovery.round()
        now = time.time()
        before = {p for p, seen in self.peers.items() if seen.fresh}
        for seen in self.peers.values():
            seen.fresh = False
        for view in views:
            self.peers[view.peer_id] = Seen(view, self._discovery.addrs(view.peer_id), now)
        self.rounds += 1
        fresh = sorted(v.peer_id for v in views)
        if set(fresh) != before:
            self.options.events("peers", count=len(fresh), peers=fresh)

    # -- campaigns -------------------------------------------------------------------------------

    async def create(self, text: str) -> Live:
        """Validate (in a child process) and pin a campaign posted over HTTP, then start running it.

        Raises:
            BadRequest: the body is not a valid campaign, names a local path, or a model cannot be
                fetched or pinned; every problem at its field.
        """
        vetted = await vet_campaign(text, self._vetting)
        policy = url_policy(self.config)
        problems = local_path_problems(vetted.campaign) + url_problems(vetted, policy)
        if problems:
            raise BadRequest("the campaign's models cannot be used", problems)
        campaign = vetted.campaign
        models = await self._pin(vetted, policy)
        campaign_id = new_campaign_id()
        record = CampaignRecord(
            campaign_id,
            campaign.name,
            utc_now(),
            "http",
            text,
            models_json(models),
            None,
            "running",
            str(self.options.results_dir / campaign_id),
        )
        self.store.add_campaign(record)
        live = Live(record, campaign, sch.Scheduler(campaign_id, campaign, models), trio.CancelScope())
        self.live[campaign_id] = live
        self._nursery.start_soon(self._run, live)
        return live

    async def _pin(self, vetted: Vetted, policy: UrlPolicy) -> dict[str, ModelRef]:
        """Fetch each model once to pin its digest; a model that cannot be fetched is named by its field."""
        pinned: dict[str, ModelRef] = {}
        for source in vetted.campaign.models:
            one = vetted.campaign.model_copy(update={"models": (source,)})
            try:
                pinned.update(await pin_models(one, Path("."), model_cache(self.config), policy))
            except FetchError as exc:
                field = vetted.url_fields.get(source.key, "model_url")
                problem = refusal_problem(field, source.url or "", exc, policy, resolved=True)
                raise BadRequest("a model cannot be used", [problem]) from exc
        return pinned

    async def _run(self, live: Live) -> None:
        cid = live.record.campaign_id
        node = self.node
        me = Identity(node.host.peer_id, node.host.private_key, tuple(node.host.addrs()))
        loop = CampaignLoop(
            campaign_id=cid,
            scheduler=live.scheduler,
            store=self.store,
            discovery=self._discovery,
            me=me,
            open_channel=lambda peer, addrs: open_negotiate(node.host, peer, addrs),
            events=self.options.events,
        )
        self.options.events("campaign", campaign=cid, submitter=node.host.peer_id)
        with live.scope:
            try:
                await loop.run()
            except Exception:  # a task boundary: one campaign's crash must not stop the server
                log.exception("campaign %s stopped on an internal error", cid)
                self.store.save_state(cid, live.scheduler.snapshot().model_dump_json().encode(), "failed")
                return
        if live.scope.cancelled_caught:
            return
        results = self.store.results(cid)  # the store's connection belongs to this thread
        live.files = await trio.to_thread.run_sync(self._write, live, results)
        self.options.events("campaign_done", campaign=cid, files={k: str(v) for k, v in live.files.items()})

    def _write(self, live: Live, results: Sequence[ResultRecord]) -> dict[str, Path]:
        """The campaign's files (CSV, JSON, HTML report) and the seeds' flat CSV; in a worker thread,
        since rendering the report takes seconds on a busy machine and the loop must keep answering."""
        cid = live.record.campaign_id
        files = write_outputs(
            Path(live.record.out_dir), cid, live.campaign, live.scheduler, results, utc_now()
        )
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
        flat = self.options.results_dir / f"{cid}_{stamp}_results.csv"
        shutil.copyfile(files["csv"], flat)
        return {**files, "flat_csv": flat}

    def campaign(self, campaign_id: str) -> CampaignState | None:
        """A campaign by id, live or stored (None if this node never ran it)."""
        live = self.live.get(campaign_id)
        if live is not None:
            return _live_state(live)
        record = self.store.campaign(campaign_id)
        return None if record is None else self._stored(record)

    def campaigns(self) -> list[CampaignState]:
        """Every campaign the store holds, newest first."""
        out: list[CampaignState] = []
        for record in self.store.campaigns():
            live = self.live.get(record.campaign_id)
            out.append(_live_state(live) if live is not None else self._stored(record))
        return out

    def _stored(self, record: CampaignRecord) -> CampaignState:
        campaign = sch.parse_campaign(record.text, source=record.source)
        return CampaignState(record, campaign, _snapshot_tasks(record), False)

    def csv(self, campaign_id: str) -> str | None:
        """The campaign's results CSV: its written file once finished, else as it stands (None: unknown)."""
        state = self.campaign(campaign_id)
        if state is None:
            return None
        written = Path(state.record.out_dir) / "results.csv"
        if state.record.status == "finished" and written.is_file():
            return written.read_text()
        live = self.live.get(campaign_id)
        scheduler = live.scheduler if live is not None else _scheduler_of(state)
        rows = campaign_rows(scheduler, self.store.results(campaign_id), state.record.created_utc)
        return sch.to_csv(row for row, _ in rows)

    def reset(self) -> int:
        """Stop every running campaign and forget every stored one and the peer view.

        Returns:
            How many running campaigns were stopped.
        """
        running = [live for live in self.live.values() if not live.scheduler.done]
        for live in running:
            live.scope.cancel()
        self.live.clear()
        self.store.clear()
        self.peers.clear()
        return len(running)

    def result_files(self) -> Sequence[Path]:
        """The seeds' flat CSV files in the results folder, newest first."""
        files = [p for p in self.options.results_dir.glob("*_results.csv") if p.is_file()]
        return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def _live_state(live: Live) -> CampaignState:
    done = live.scheduler.done
    record = replace(live.record, status="finished" if done else "running")
    return CampaignState(record, live.campaign, tuple(live.scheduler.tasks()), not done)


def _snapshot_tasks(record: CampaignRecord) -> tuple[sch.TaskView, ...]:
    if record.snapshot is None:
        return ()
    return tuple(sch.SchedulerSnapshot.model_validate_json(record.snapshot).tasks)


def _scheduler_of(state: CampaignState) -> sch.Scheduler:
    record = state.record
    if record.snapshot is None:
        return sch.Scheduler(record.campaign_id, state.campaign, refs_from_json(record.models))
    return sch.Scheduler.restore(sch.SchedulerSnapshot.model_validate_json(record.snapshot))


@asynccontextmanager
async def open_state(config: NodeConfig, options: ServeOptions) -> AsyncIterator[ApiState]:
    """The serving node (with the embedded swarm when no gate is configured), watching its peers."""
    submit_options = SubmitOptions(
        out_root=options.results_dir,
        events=options.events,
        discovery=options.discovery,
        embedded_workers=options.embedded_workers,
    )
    async with open_submitter(config, submit_options) as node, trio.open_nursery() as nursery:
        state = ApiState(node, config, options, nursery)
        nursery.start_soon(state.watch_peers)
        yield state
        nursery.cancel_scope.cancel()
