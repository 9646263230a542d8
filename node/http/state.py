"""What `sark-node serve` knows and runs: the swarm's peers as discovery sees them, and campaigns.

One submitter node, one campaign store. A background task asks the swarm for its live workers every
`refresh_s`; each campaign posted over HTTP runs its own `CampaignLoop` (the same scheduler as
`submit`) in the state's nursery, several at once, and writes its files when it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import final

import trio

import scheduler as sch
from node.config import NodeConfig, swarm_of
from node.errors import CampaignInterrupted, DiskFull
from node.events import EventSink, quiet
from node.http.errors import BadRequest
from node.http.vetting import (
    MAX_VETTING,
    Vetted,
    endpoint_keys,
    local_path_problems,
    refusal_problem,
    url_problems,
    vet_campaign,
)
from node.p2p.node import Node
from node.submitter.discovery import Discovery, DiscoveryConfig
from node.submitter.models import pin_models
from node.submitter.outputs import Shown, campaign_rows, write_whole
from node.submitter.run import (
    CampaignRun,
    LocalSwarm,
    NewCampaign,
    SubmitOptions,
    drive,
    mark_failed,
    open_submitter,
    restore,
    start,
    store_of,
    write_out,
)
from node.submitter.store import CampaignRecord, CampaignStatus, CampaignStore, Submitter
from node.transfer.cache import model_cache
from node.transfer.fetch import FetchError
from node.transfer.urls import UrlPolicy, url_policy
from protocol import ModelRef
from scheduler.results import Front, Ranking, groups_of, ranking_of

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
        swarm: the local swarm to start when no gate is configured (the CLI's embedded one).
        allowed_hosts: Host names served besides the bound address (``--allowed-host``).
        allow_origins: web origins whose pages may call the API (``--allow-origin``).
        key_source: reads a black-box campaign's `api_key_env` (the CLI gives its environment's).
    """

    results_dir: Path = Path("sark-results")
    events: EventSink = quiet
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    refresh_s: float = 2.0
    stale_after_s: float = 30.0
    swarm: LocalSwarm | None = None
    allowed_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    key_source: Callable[[str], str | None] = field(default=lambda _: None, repr=False)
    stop: trio.Event | None = None
    """Set on Ctrl-C: every running campaign withdraws what is out and is stored "interrupted"."""


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

    run: CampaignRun
    scope: trio.CancelScope
    files: dict[str, Path] = field(default_factory=dict)
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # black-box API keys, memory only
    ended: trio.Event = field(default_factory=trio.Event)
    status: CampaignStatus = CampaignStatus.RUNNING
    """RUNNING until the loop stopped and, for a finished campaign, its files are written and listed:
    the API says "completed" only then (the seeds poll, then list and download at once)."""
    error: str = ""
    """Why the campaign ended FAILED: its loop's internal error, or why its files were not written."""


@dataclass(frozen=True)
class CampaignState:
    """One campaign as the API reports it, live or stored."""

    record: CampaignRecord
    campaign: sch.Campaign
    tasks: tuple[sch.TaskView, ...]
    running: bool
    error: str = ""


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
        keys, missing = endpoint_keys(vetted.campaign, self.options.key_source)
        problems = local_path_problems(vetted.campaign) + url_problems(vetted, policy) + missing
        if problems:
            raise BadRequest("the campaign's models cannot be used", problems)
        models = await self._pin(vetted, policy)
        new = NewCampaign(vetted.campaign, models, text, "http")
        run = start(self.store, new, self.options.results_dir)
        live = Live(run, trio.CancelScope(), keys=keys)
        self.live[run.campaign_id] = live
        self._nursery.start_soon(self._run, live)
        return live

    async def _pin(self, vetted: Vetted, policy: UrlPolicy) -> dict[str, ModelRef]:
        """Fetch each model once to pin its digest; a model that cannot be fetched is named by its field."""
        pinned: dict[str, ModelRef] = {}
        for source in vetted.campaign.models:
            one = vetted.campaign.with_(models=(source,))
            try:
                pinned.update(await pin_models(one, Path("."), model_cache(self.config), policy))
            except FetchError as exc:
                field = vetted.url_fields.get(source.key, "model_url")
                problem = refusal_problem(field, source.url or "", exc, policy, resolved=True)
                raise BadRequest("a model cannot be used", [problem]) from exc
        return pinned

    async def _run(self, live: Live) -> None:
        try:
            await self._drive(live)
        finally:
            live.ended.set()

    async def _drive(self, live: Live) -> None:
        cid = live.run.campaign_id
        self.store.claim(cid, swarm_of(self.config), Submitter.this_process())
        with live.scope:
            try:
                events, stop = self.options.events, self.options.stop
                await drive(
                    self.node, live.run, self.store, self._discovery, events=events, keys=live.keys, stop=stop
                )
            except CampaignInterrupted:  # Ctrl-C: withdrawn and stored "interrupted" by the loop
                live.status = CampaignStatus.INTERRUPTED
                return
            except Exception as exc:  # a task boundary: one campaign's crash must not stop the server
                log.exception("campaign %s stopped on an internal error", cid)
                mark_failed(self.store, live.run)
                live.status, live.error = CampaignStatus.FAILED, f"internal error: {_named(exc)}"
                return
        if live.scope.cancelled_caught:
            return
        await self._write_out(live)

    async def _write_out(self, live: Live) -> None:
        """Write a finished campaign's files; a failure is the campaign's, recorded with its reason,
        never the server's (cancellation and Ctrl-C pass: they are no `Exception`)."""
        cid = live.run.campaign_id
        try:
            live.files = await trio.to_thread.run_sync(self._write, live)
        except DiskFull as exc:  # the results stay in the store: the files can be written again later
            log.error("campaign %s: %s", cid, exc.detail)
            live.error = f"outputs not written: {exc.detail}"
        except Exception as exc:  # the output step's boundary: one campaign's files must not stop the API
            log.exception("campaign %s: its files could not be written", cid)
            live.error = f"outputs not written: {_named(exc)}"
        if live.error:
            live.status = CampaignStatus.FAILED
            self.options.events("campaign_failed", campaign=cid, error=live.error)
            return
        live.status = CampaignStatus.FINISHED
        self.options.events("campaign_done", campaign=cid, files={k: str(v) for k, v in live.files.items()})

    def _write(self, live: Live) -> dict[str, Path]:
        """The campaign's files (CSV, JSON, HTML report) and the seeds' flat CSV; in a worker thread,
        since rendering the report takes seconds on a busy machine and the loop must keep answering."""
        cid = live.run.campaign_id
        files, _ = write_out(live.run, self.store, self.node.host.private_key, model_cache(self.config))
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
        flat = self.options.results_dir / f"{cid}_{stamp}_results.csv"
        write_whole(flat, files["csv"].read_text())
        return {**files, "flat_csv": flat}

    async def wind_down(self) -> list[str]:
        """After `stop` was set: wait until every running campaign has withdrawn its tasks; their ids."""
        running = [live for live in self.live.values() if not live.ended.is_set()]
        for live in running:
            await live.ended.wait()
        return [live.run.campaign_id for live in running if live.status == CampaignStatus.INTERRUPTED]

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
        run = restore(record)
        return CampaignState(record, run.campaign, tuple(run.scheduler.tasks()), False)

    def csv(self, campaign_id: str) -> str | None:
        """The campaign's results CSV: its written file once finished, else as it stands (None: unknown)."""
        state = self.campaign(campaign_id)
        if state is None:
            return None
        written = Path(state.record.out_dir) / "results.csv"
        ended = state.record.status in (CampaignStatus.FINISHED, CampaignStatus.CANCELLED)
        if ended and written.is_file():
            return written.read_text()
        return sch.to_csv(row for row, _ in self.rows(state))

    def rows(self, state: CampaignState) -> list[Shown]:
        """The campaign's rows as its files render them (Verified, the cost columns), as it stands."""
        cid = state.record.campaign_id
        live = self.live.get(cid)
        run = live.run if live is not None else restore(state.record)
        return campaign_rows(run.scheduler, self.store.results(cid), state.record.created_utc, run.campaign)

    def fronts(self, state: CampaignState) -> tuple[tuple[Front, ...], Ranking | None]:
        """The campaign's fronts and its ranking as they stand (`scheduler.results.front`, `frontrank`,
        as results.json has them), for the dashboard; none, and no rows built, without a generate job."""
        if not any(job.spec.generate is not None for job in state.campaign.jobs):
            return (), None
        tasks = [sch.ReportTask.of(row, result) for row, result in self.rows(state)]
        groups = groups_of(state.campaign, ((t.row, t.measurement) for t in tasks))
        return tuple(g for g in groups if len(g.points) > 1), ranking_of(state.campaign.rank, groups)

    def speedups(self, state: CampaignState) -> tuple[tuple[str, str], ...]:
        """Each task's SpeedupVsCpu as the campaign's files have it as it stands ((task id, cell)), for
        the dashboard's matrix: a baseline that completes after the row changes the row's cell, so it
        travels with the campaign, not with a result fetched once. None, and no rows built, where the
        campaign has fewer than two tensor units."""
        units = {job.spec.compute_unit for job in state.campaign.jobs if job.spec.generate is None}
        if len(units) < 2:
            return ()
        rows = self.rows(state)
        return tuple((row["JobId"], row["SpeedupVsCpu"]) for row, _ in rows if row.get("SpeedupVsCpu"))

    def reset(self) -> int:
        """Stop every running campaign and forget every stored one and the peer view.

        Returns:
            How many running campaigns were stopped.
        """
        running = [live for live in self.live.values() if not live.run.scheduler.done]
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
    running = live.status == CampaignStatus.RUNNING
    record = replace(live.run.record, status=live.status)
    return CampaignState(record, live.run.campaign, tuple(live.run.scheduler.tasks()), running, live.error)


def _named(exc: BaseException) -> str:
    """An error as the API reports it: its class and message, cut to 300 characters."""
    message = str(exc)
    message = message[:300] + "…" if len(message) > 300 else message
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@asynccontextmanager
async def open_state(config: NodeConfig, options: ServeOptions) -> AsyncIterator[ApiState]:
    """The serving node (with the embedded swarm when no gate is configured), watching its peers."""
    submit_options = SubmitOptions(
        out_root=options.results_dir,
        events=options.events,
        discovery=options.discovery,
        swarm=options.swarm,
    )
    async with open_submitter(config, submit_options) as node, trio.open_nursery() as nursery:
        state = ApiState(node, config, options, nursery)
        nursery.start_soon(state.watch_peers)
        yield state
        nursery.cancel_scope.cancel()
