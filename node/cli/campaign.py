"""`sark-node submit`, `plan`: running campaigns (`node.cli.stored` reads the ones stored)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from node.cli.live import LiveView
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
    resume_flags,
    run,
)
from node.events import EventSink, json_lines, quiet

if TYPE_CHECKING:
    from rich.console import Group

    import scheduler as sch
    from node.config import NodeConfig

LOOK_S, WAIT_S = 5.0, 60.0
"""How long `submit` and `plan` look for workers: a short look when the campaign takes whoever answers,
a long one when `--wait-peers` names how many to wait for (a loaded worker's first answer can take
seconds; the look ends as soon as that many answered)."""

CampaignArg = Annotated[Path, typer.Argument(help="campaign file: YAML, or the seeds' JSON body")]
OutOpt = Annotated[Path, typer.Option("--out", help="results go to OUT/<campaign-id>/")]
WaitOpt = Annotated[
    int | None,
    typer.Option("--wait-peers", help="wait until this many workers answered (up to --discover-timeout)"),
]
DiscoverOpt = Annotated[
    float | None,
    typer.Option(
        "--discover-timeout",
        min=0.0,
        help=f"how long to look for workers, seconds (default {LOOK_S:g}, or {WAIT_S:g} with --wait-peers)",
    ),
]
RediscoverOpt = Annotated[
    float | None,
    typer.Option(
        "--rediscover", min=0.5, help="seconds between fresh looks at the swarm (churn; default 10)"
    ),
]
WorkersOpt = Annotated[int, typer.Option("--workers", help="local workers in the embedded swarm (no --gate)")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="log what the node does")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="count tasks no peer could take (Unschedulable) as failures: exit 1")
]


def _read_campaign(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        fail(f"error: cannot read campaign file {path}: {exc.strerror}", 2)


def _check_campaign(text: str, path: Path) -> sch.Campaign:
    """Validate before anything touches the network: the file, the files it names and its local models,
    in a child (`node.submitter.vetting`); every bad field named, exit 2; a child that could not
    start, exit 1."""
    import trio

    import scheduler as sch
    from node.errors import ChildNotStarted
    from node.submitter.vetting import vet_local

    try:
        return trio.run(vet_local, text, path)
    except ChildNotStarted as exc:
        fail(f"error: {exc.detail}", 1)
    except sch.CampaignError as exc:
        typer.secho(f"error: {path} is not a valid campaign:", fg=typer.colors.RED, err=True)
        for problem in exc.problems:
            typer.secho(f"  {problem}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def _checked(path: Path | None) -> tuple[str, sch.Campaign | None]:
    """The campaign file's text and the campaign checked in a child (exit 2 if bad); none to resume."""
    if path is None:
        return "", None
    text = _read_campaign(path)
    return text, _check_campaign(text, path)


def _keys_for(config: NodeConfig, vetted: sch.Campaign | None, resume: str | None) -> dict[str, str]:
    """The black-box keys of the campaign file (validated already), or of the stored campaign that
    is resumed: no key is ever stored, so a resume reads them from this environment again."""
    from node.submitter import run as runtime

    if vetted is not None:
        return _endpoint_keys(vetted)
    stored = runtime.store_of(config).campaign(resume or "")
    return _endpoint_keys(runtime.restore(stored).campaign) if stored is not None else {}


def _endpoint_keys(campaign: sch.Campaign) -> dict[str, str]:
    """The black-box endpoints' API keys from this process's environment, by variable name; exit 2 for a
    variable that is not set. The values stay in memory: they go only into offers."""
    keys: dict[str, str] = {}
    for job in campaign.jobs:
        endpoint = job.spec.generate.endpoint if job.spec.generate else None
        name = endpoint.api_key_env if endpoint else None
        if name is not None and name not in keys:
            value = os.environ.get(name)
            if not value:
                fail(f"error: {job.label}.endpoint.api_key_env: {name} is not set in the environment", 2)
            keys[name] = value
    return keys


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
    discover_timeout: float | None,
    workers: int,
    events: bool = False,
    rediscover: float | None = None,
    sink: EventSink = quiet,
) -> Any:
    import trio

    from node.cli.embedded import embedded_swarm
    from node.submitter.discovery import DiscoveryConfig
    from node.submitter.run import SubmitOptions

    if discover_timeout is None:
        discover_timeout = LOOK_S if wait_peers is None else WAIT_S
    discovery = DiscoveryConfig(want=wait_peers, timeout_s=discover_timeout)
    if rediscover is not None:
        discovery = dataclasses.replace(discovery, interval_s=rediscover)
    return SubmitOptions(
        out_root=out,
        events=json_lines if events else sink,  # --events: every event as a JSON line
        discovery=discovery,
        swarm=partial(embedded_swarm, workers=workers),
        stop=trio.Event(),  # Ctrl-C: withdraw what is out, store "interrupted", say how to resume
        workers=workers,
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
    discover_timeout: DiscoverOpt = None,
    rediscover: RediscoverOpt = None,
    workers: WorkersOpt = 1,
    allow_network: AllowNetOpt = None,
    allow_http: AllowHttpOpt = False,
    verbose: VerboseOpt = False,
    events: EventsOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Run a campaign across the swarm (an embedded local swarm when no gate is given).

    Exit code: 0 when every task that could be placed completed, 1 when any failed or was cancelled
    (with --strict also when one was unschedulable), 2 for a bad campaign file or configuration.
    """
    from node.cli.exits import exit_for, fail_if_nobody
    from node.submitter import run as runtime

    if (campaign is None) == (resume is None):
        fail("error: give a campaign file, or --resume CAMPAIGN_ID", 2)
    config = _config(gate_addrs, data_dir, config_file, allow_network, allow_http)
    view = LiveView(enabled=not as_json and not events and sys.stderr.isatty(), announce=not as_json)
    options = _options(out, wait_peers, discover_timeout, workers, events, rediscover, view.event)
    text, vetted = _checked(campaign)
    flags = resume_flags(gate_addrs, data_dir, config_file)
    keys = _keys_for(config, vetted, resume)
    options = dataclasses.replace(options, keys=keys, resume_flags=flags, gate_given=bool(gate_addrs))

    async def main() -> runtime.Outcome:
        with view:
            if campaign is not None:
                return await runtime.submit(config, campaign, text, options, view=view.update, vetted=vetted)
            assert resume is not None
            return await runtime.resume(config, resume, options, view=view.update)

    outcome = run(main, verbose=verbose, stop=options.stop)  # bad model paths and unknown ids: exit 2
    if events:
        _outcome_event(outcome)
    else:
        _report(outcome, as_json)
    fail_if_nobody(outcome)
    exit_for(outcome.tasks, strict=strict)


def _outcome_event(outcome: Any) -> None:
    """`--events`: the campaign's end as one JSON line."""
    from scheduler.results import verification_counts

    json_lines(
        "outcome",
        campaign=outcome.campaign_id,
        files={k: str(v) for k, v in outcome.files.items()},
        accepted=outcome.tally.accepted,
        stale=outcome.tally.stale,
        rejected=outcome.tally.rejected,
        lapsed=outcome.tally.lapsed,
        released=outcome.tally.released,
        verification=verification_counts(outcome.tasks),
    )


def _report(outcome: Any, as_json: bool) -> None:
    import scheduler as sch
    from node.cli.console import console as out_console
    from scheduler.results import verification_counts, verification_line

    tasks: Sequence[sch.TaskView] = outcome.tasks
    if as_json:
        print(
            json.dumps(
                {
                    "campaign_id": outcome.campaign_id,
                    "files": {k: str(v) for k, v in outcome.files.items()},
                    "tasks": [t.model_dump(mode="json") for t in tasks],
                    "verification": verification_counts(tasks),
                }
            )
        )
        return
    from protocol import for_rich

    console = out_console()
    console.print(end_tables(outcome.report))  # the value the files were written from: none is read back
    for shapes, jobs in _defaulted(outcome.report).items():  # once per shapes fed, not once per task
        console.print(
            f"inputs defaulted: {for_rich(shapes)} (dynamic dimensions got the documented defaults; "
            f"set input_shapes to choose): {for_rich(_jobs_named(jobs))}"
        )
    for task in tasks:
        if task.state != sch.TaskState.DONE:
            ending = f"{task.shown_unit}: {task.state.value}: {for_rich(task.detail)}"
            console.print(f"[yellow]{for_rich(task.task_id)}[/] {ending}")
            for reason in task.reasons:
                console.print(f"    {for_rich(reason)}")
    console.print(f"campaign [bold]{for_rich(outcome.campaign_id)}[/]")
    for kind, path in outcome.files.items():
        console.print(f"  {kind}: {for_rich(str(path))}")
    if line := verification_line(verification_counts(tasks)):  # the last line: what was verified
        console.print(line)


def _defaulted(report: sch.CampaignReport) -> dict[str, list[str]]:
    """The input shapes that dynamic dimensions' defaults gave, each with the jobs fed them."""
    found: dict[str, list[str]] = {}
    for result in report.results:
        if result.measurement is not None and result.measurement.inputs_defaulted:
            found.setdefault(result.row["InputShapes"], []).append(result.row["JobId"])
    return found


def _jobs_named(tasks: list[str]) -> str:
    """ "tasks job-0-0, job-1-0" (the campaign id, the same on every task, said once above)."""
    from scheduler.results import short_task

    return "tasks " + ", ".join(short_task(task) for task in tasks)


def end_tables(report: sch.CampaignReport) -> Group:
    """The generate tasks' TTFT, TPOT, ITL, decode tok/s and quality first (what an LLM run is for);
    then device x compute unit: the median latency of each task, the same matrix as report.html; then
    each replica group's agreed figure, band, replicas and outlier (a campaign that asked `verify:`);
    then performance per dollar and per watt, each price with its source. A sweep's points on each
    front and the campaign's ranking (`rank:`) follow the generate table."""
    from rich.console import Group

    from node.report.costreport import cost_table
    from node.report.frontreport import front_table
    from node.report.genreport import generation_table
    from node.report.peakreport import peaks_table
    from node.report.rankreport import ranking_table
    from node.report.tables import matrix_tables, runtime_table
    from node.report.verifyreport import verification_table
    from scheduler.results import entries_of

    generation, cost, verified = generation_table(report), cost_table(report), verification_table(report)
    ran, peaks = runtime_table(report), peaks_table(report)
    front, ranking = front_table(report), ranking_table(report)
    return Group(
        *([generation] if generation else []),
        *([front] if front else []),
        *([ranking] if ranking else []),
        *matrix_tables(entries_of(report)),
        *([peaks] if peaks else []),
        *([ran] if ran else []),
        *([verified] if verified else []),
        *([cost] if cost else []),
    )


def plan(
    campaign: CampaignArg,
    gate_addrs: GateOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
    wait_peers: WaitOpt = None,
    discover_timeout: DiscoverOpt = None,
    workers: WorkersOpt = 1,
) -> None:
    """Dry run: per job, the matching peers and why every other peer was rejected. Sends no offer."""
    from node.submitter import run as runtime

    config = _config(gate_addrs, data_dir, config_file, None, False)
    text = _read_campaign(campaign)
    vetted = _check_campaign(text, campaign)
    options = _options(Path("sark-results"), wait_peers, discover_timeout, workers)

    async def main() -> sch.Plan:
        return await runtime.plan(config, campaign, text, options, vetted)

    from node.cli.planview import plan_json, print_plan

    result = run(main)
    errors = _class_errors(config)
    if as_json:
        print(json.dumps(plan_json(result, errors)))
        return
    print_plan(result, errors)


def _class_errors(config: NodeConfig) -> dict[str, tuple[float, ...]]:
    """The store's pools of class errors (what `submit` would judge replicas with), {} with no store."""
    from node.submitter.store import CampaignStore

    path = config.data.campaigns
    return CampaignStore(path).class_errors() if path.is_file() else {}


def register(app: typer.Typer) -> None:
    """Add `submit` and `plan` to the CLI."""
    app.command()(submit)
    app.command()(plan)
