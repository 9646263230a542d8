"""`sark-node submit`, `plan`, `status`, `cancel`, `results`: running campaigns."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

import scheduler as sch
from node.cli.options import (
    AllowHttpOpt,
    AllowNetOpt,
    ConfigOpt,
    DataDirOpt,
    EventsOpt,
    GateOpt,
    JsonOpt,
    as_tuple,
    build_config,
    fail,
    run,
)
from node.config import NodeConfig
from node.discovery import DiscoveryConfig
from node.events import json_lines, quiet
from node.prompts import read_prompt_files

CampaignArg = Annotated[Path, typer.Argument(help="campaign file: YAML, or the seeds' JSON body")]
OutOpt = Annotated[Path, typer.Option("--out", help="results go to OUT/<campaign-id>/")]
WaitOpt = Annotated[int | None, typer.Option("--wait-peers", help="wait until this many workers answered")]
DiscoverOpt = Annotated[
    float, typer.Option("--discover-timeout", help="how long to look for workers, seconds")
]
RediscoverOpt = Annotated[
    float, typer.Option("--rediscover", min=0.5, help="seconds between fresh looks at the swarm (churn)")
]
WorkersOpt = Annotated[int, typer.Option("--workers", help="local workers in the embedded swarm (no --gate)")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="log what the node does")]

_console = Console(stderr=True)


def _read_campaign(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        fail(f"error: cannot read campaign file {path}: {exc.strerror}", 2)


def _check_campaign(text: str, path: Path) -> sch.Campaign:
    """Validate before anything touches the network: every bad field named, exit 2."""
    try:
        return sch.parse_campaign(text, source=str(path), files=read_prompt_files(text, path.parent))
    except sch.CampaignError as exc:
        typer.secho(f"error: {path} is not a valid campaign:", fg=typer.colors.RED, err=True)
        for problem in exc.problems:
            typer.secho(f"  {problem}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def _config(
    gates: list[str] | None,
    data_dir: Path | None,
    config_file: Path | None,
    allow_network: list[str] | None,
    allow_http: bool,
) -> NodeConfig:
    return build_config(
        config_file,
        gates=as_tuple(gates),
        data_dir=data_dir,
        allow_networks=as_tuple(allow_network),
        allow_http=allow_http or None,
    )


def _options(
    out: Path,
    wait_peers: int | None,
    discover_timeout: float,
    workers: int,
    events: bool = False,
    rediscover: float = DiscoveryConfig.interval_s,
) -> Any:
    from node.campaign import SubmitOptions

    return SubmitOptions(
        out_root=out,
        events=json_lines if events else quiet,
        discovery=DiscoveryConfig(want=wait_peers, timeout_s=discover_timeout, interval_s=rediscover),
        embedded_workers=workers,
    )


def submit(
    campaign: Annotated[
        Path | None, typer.Argument(help="campaign file: YAML, or the seeds' JSON body")
    ] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="resume this stored campaign id")] = None,
    gate_addrs: GateOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    out: OutOpt = Path("sark-results"),
    as_json: JsonOpt = False,
    wait_peers: WaitOpt = None,
    discover_timeout: DiscoverOpt = 5.0,
    rediscover: RediscoverOpt = DiscoveryConfig.interval_s,
    workers: WorkersOpt = 1,
    allow_network: AllowNetOpt = None,
    allow_http: AllowHttpOpt = False,
    verbose: VerboseOpt = False,
    events: EventsOpt = False,
) -> None:
    """Run a campaign across the swarm (an embedded local swarm when no gate is given)."""
    from node import campaign as runtime

    if (campaign is None) == (resume is None):
        fail("error: give a campaign file, or --resume CAMPAIGN_ID", 2)
    config = _config(gate_addrs, data_dir, config_file, allow_network, allow_http)
    options = _options(out, wait_peers, discover_timeout, workers, events, rediscover)
    text = ""
    if campaign is not None:
        text = _read_campaign(campaign)
        _check_campaign(text, campaign)
    view = _LiveView(enabled=not as_json and not events and sys.stderr.isatty())

    async def main() -> runtime.Outcome:
        with view:
            if campaign is not None:
                return await runtime.submit(config, campaign, text, options, view=view.update)
            assert resume is not None
            return await runtime.resume(config, resume, options, view=view.update)

    outcome = run(main, verbose=verbose)  # bad model paths and unknown ids are ConfigErrors: exit 2
    if events:
        json_lines(
            "outcome",
            campaign=outcome.campaign_id,
            files={k: str(v) for k, v in outcome.files.items()},
            accepted=outcome.tally.accepted,
            stale=outcome.tally.stale,
            rejected=outcome.tally.rejected,
        )
        return
    _report(outcome, as_json)


def _report(outcome: Any, as_json: bool) -> None:
    tasks: Sequence[sch.TaskView] = outcome.tasks
    if as_json:
        print(
            json.dumps(
                {
                    "campaign_id": outcome.campaign_id,
                    "files": {k: str(v) for k, v in outcome.files.items()},
                    "tasks": [t.model_dump(mode="json") for t in tasks],
                }
            )
        )
        return
    console = Console()
    console.print(_matrix(tasks, outcome))
    for task in tasks:
        if task.state != sch.TaskState.DONE:
            console.print(f"[yellow]{task.task_id}[/] {task.unit.value}: {task.state.value}: {task.detail}")
            for reason in task.reasons:
                console.print(f"    {reason}")
    console.print(f"campaign [bold]{outcome.campaign_id}[/]")
    for kind, path in outcome.files.items():
        console.print(f"  {kind}: {path}")


def _matrix(tasks: Sequence[sch.TaskView], outcome: Any) -> Group:
    """Device x compute unit: the median inference latency of each task, the same matrix as report.html."""
    from node.report import load_document, matrix_tables
    from scheduler.report import entries_from_document

    return Group(*matrix_tables(entries_from_document(load_document(outcome.files["json"]))))


class _LiveView:
    """A row per task (device, unit, phase, progress, median so far), redrawn as events arrive."""

    def __init__(self, *, enabled: bool) -> None:
        self._live = (
            Live(Table(), console=_console, refresh_per_second=4, transient=False) if enabled else None
        )
        self._last = 0.0

    def __enter__(self) -> _LiveView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def update(self, tasks: Sequence[sch.TaskView]) -> None:
        now = time.monotonic()
        if self._live is None or now - self._last < 0.2:
            return
        self._last = now
        table = Table(title="tasks")
        for name in ("task", "device", "unit", "state", "phase", "progress", "median ms"):
            table.add_column(name)
        for t in tasks:
            p = t.progress
            table.add_row(
                t.task_id.rsplit("-job-", 1)[-1],
                t.device_name or (t.peer_id or "")[-8:],
                t.unit.value,
                t.state.value,
                p.phase.value if p.phase else "",
                f"{p.done}/{p.total}" if p.total else "",
                f"{p.median_ms:.3f}" if p.median_ms is not None else "",
            )
        self._live.update(table)


def plan(
    campaign: CampaignArg,
    gate_addrs: GateOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
    wait_peers: WaitOpt = None,
    discover_timeout: DiscoverOpt = 5.0,
    workers: WorkersOpt = 1,
) -> None:
    """Dry run: per job, the matching peers and why every other peer was rejected. Sends no offer."""
    from node import campaign as runtime

    config = _config(gate_addrs, data_dir, config_file, None, False)
    text = _read_campaign(campaign)
    _check_campaign(text, campaign)
    options = _options(Path("sark-results"), wait_peers, discover_timeout, workers)

    async def main() -> sch.Plan:
        return await runtime.plan(config, campaign, text, options)

    result = run(main)
    if as_json:
        print(json.dumps(_plan_json(result)))
        return
    _print_plan(result)


def _plan_json(result: sch.Plan) -> dict[str, Any]:
    return {
        "jobs": [
            {
                "job": job.job.index,
                "unit": job.job.spec.compute_unit.value,
                "wanted": job.wanted,
                "chosen": [r.peer.peer_id for r in job.chosen],
                "matching": [r.peer.peer_id for r in job.matching],
                "rejected": [
                    {"peer_id": r.peer_id, "device": r.device_name, "reasons": list(r.reasons)}
                    for r in job.rejected
                ],
                "shortfall": job.shortfall,
            }
            for job in result.jobs
        ]
    }


def _print_plan(result: sch.Plan) -> None:
    console = Console()
    for job in result.jobs:
        unit = job.job.spec.compute_unit.value
        console.print(
            f"[bold]job {job.job.index}[/] {unit}: {len(job.chosen)} of {job.wanted} task(s) placed"
        )
        for ranked in job.matching:
            chosen = "[green]✓[/]" if ranked in job.chosen else "[cyan]·[/]"
            console.print(f"  {chosen} {ranked.peer.profile.device_name} {ranked.peer.peer_id}")
        for rejection in job.rejected:
            console.print(
                f"  [red]✗[/] {rejection.device_name} {rejection.peer_id}: {'; '.join(rejection.reasons)}"
            )
        if job.shortfall:
            console.print(f"  [yellow]{job.shortfall}[/]")


IdArg = Annotated[str, typer.Argument(help="campaign id (from submit or status)")]


def _stored(data_dir: Path | None, config_file: Path | None) -> Any:
    from node.campaign import store_of

    return store_of(build_config(config_file, data_dir=data_dir))


def _restored(record: Any) -> sch.Scheduler | None:
    if record.snapshot is None:
        return None
    return sch.Scheduler.restore(sch.SchedulerSnapshot.model_validate_json(record.snapshot))


def status(
    campaign_id: Annotated[str | None, typer.Argument(help="a campaign id; all campaigns if omitted")] = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A campaign's tasks as the store last saw them, or every stored campaign."""
    store = _stored(data_dir, config_file)
    if campaign_id is None:
        records = store.campaigns()
        rows = [
            {
                "campaign_id": r.campaign_id,
                "name": r.name,
                "created": r.created_utc,
                "status": r.status,
                "results": len(store.results(r.campaign_id)),
            }
            for r in records
        ]
        if as_json:
            print(json.dumps({"campaigns": rows}))
            return
        table = Table("campaign", "name", "created", "status", "results")
        for row in rows:
            table.add_row(*(str(v) for v in row.values()))
        Console().print(table)
        return
    record = store.campaign(campaign_id)
    if record is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    scheduler = _restored(record)
    tasks = list(scheduler.tasks()) if scheduler is not None else []
    if as_json:
        print(
            json.dumps(
                {
                    "campaign_id": campaign_id,
                    "status": record.status,
                    "tasks": [t.model_dump(mode="json") for t in tasks],
                }
            )
        )
        return
    table = Table("task", "unit", "device", "state", "detail", title=f"{campaign_id} ({record.status})")
    for t in tasks:
        table.add_row(t.task_id, t.unit.value, t.device_name or "", t.state.value, t.detail)
    Console().print(table)


def cancel(campaign_id: IdArg, data_dir: DataDirOpt = None, config_file: ConfigOpt = None) -> None:
    """Cancel a campaign: its submitter (running now, or on --resume) cancels every task on its worker."""
    from node.submitter import utc_now

    store = _stored(data_dir, config_file)
    if store.campaign(campaign_id) is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    store.request_cancel(campaign_id, utc_now())
    print(f"cancel requested for {campaign_id}")


def results(
    campaign_id: IdArg,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
) -> None:
    """Print a campaign's results.csv (every task, rebuilt from the store) on stdout."""
    from node.outputs import campaign_rows
    from node.submitter import utc_now

    store = _stored(data_dir, config_file)
    record = store.campaign(campaign_id)
    if record is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    scheduler = _restored(record)
    if scheduler is None:
        fail(f"error: campaign {campaign_id} never got as far as discovery", 1)
    rows = campaign_rows(scheduler, store.results(campaign_id), utc_now())
    sys.stdout.write(sch.to_csv(row for row, _ in rows))


def register(app: typer.Typer) -> None:
    """Add the campaign commands to the CLI."""
    app.command()(submit)
    app.command()(plan)
    app.command()(status)
    app.command()(cancel)
    app.command()(results)
