"""The `sark-node` command line: one typer app, commands registered by topic.

Modules:
    local     info, bench: this device only, no network
    swarm     gate, join, peers, id: the libp2p swarm
    owner     owner new, owner id: the owner key whose devices count as one vote in a quorum
    records   what peers shows of the submitter's records of peers (why distrusted, on whose evidence)
    peerchallenge  peers --challenge: each listed peer's CPU and GPU claims challenged, and shown
    campaign  submit, plan: running campaigns
    planview  what plan shows of a dry run: its terminal lines and plan --json
    stored    status, cancel, results: the campaigns in this node's store
    options   the options and plumbing every command shares
    console   the rich console (never hard-wraps a pipe or a file) and peer ids shortened to their end
    exits     the exit code of a finished campaign (0 all placeable tasks done, 1 any failed)
    report    report: re-render a stored campaign (html, csv, json, md, aiperf records), or diff two campaigns
    proof     verify FOLDER: a campaign's bundle checked offline; board FOLDER... --out DIR: a static board;
              import TOOL FILE [--board DIR]: another tool's results as unverified rows
    serve     serve: the orchestrator's REST API and a live dashboard
    embedded  the embedded local swarm (a gate and workers on loopback) for submit, plan and serve
    service   service install, uninstall, status: `join` as a systemd user unit or a launchd agent
    schema    schema campaign: the campaign file's JSON Schema (for editors) or its Markdown reference
    __main__  `python -m node.cli`, for a service where no `sark-node` script is installed
    live      the live view of submit: a row per task, redrawn on stderr

Start-up stays fast: the app and every command module import only typer and our light modules; each
command imports what it runs (trio, pydantic, libp2p, onnxruntime, matplotlib) inside its function.
Help is click's plain layout (`rich_markup_mode=None`): flags read as flags, with no `<bool>` beside
them, and `--help` never loads typer's rich help renderer.

Ctrl-C, and the children
------------------------

Ctrl-C is not a crash: `node/cli/options.py` `run()` watches SIGINT and sets the command's `stop` event; the
campaign loop feeds the scheduler `SubmitterStopped`, which withdraws every task out on offer or lease (a
`SendCancel` to its worker; pending again on the same peer, the attempt struck so no retry budget is spent),
stores the campaign `interrupted` and raises `CampaignInterrupted` (exit 130, its `--resume` line). `serve`
hands the same `stop` to every campaign it drives (`ServeOptions.stop`), waits for each to withdraw
(`ApiState.wind_down`) and names them in its line. Without a `stop` (gate, peers), at a second Ctrl-C or 10
s later, `run()` cancels the command; nested groups of KeyboardInterrupt and Cancelled are an interruption
too, never a traceback. `join` runs with `own_signals`: no watch, its own receiver
(`leave.serve_until_signalled`) takes SIGINT and SIGTERM alike for the graceful leave (trio gives a signal
only to the receiver opened last, so a watch beside it used to take its Ctrl-C: exit 130, a lapse). A
worker's measurement thread sets its harness's cancel event when the node is cancelled, so the child is
killed, not waited out. A terminal's Ctrl-C reaches the whole process group: children are started with
SIGINT blocked and ignore it from their first line (`drivers/measuring/spawning.py`; multiprocessing's
resource tracker is started first, since starting it unblocks SIGINT in the starting thread), so only the
parent decides what stops. `start_child` there is the one way `drivers` starts a child (measuring, probe,
token count): besides the guard, the child's first step drops the caller's folder from `sys.path` (spawn
puts the parent's `""` there as the folder it started in) and changes into an empty folder of its own, so
nothing planted where the user ran the command (a `yaml.py`) is imported; it takes its `Limits` (`RLIMIT_AS`
is set only by `cap_address_space`, also for the inspect cap and a task's memory limit) and says `started`.
A child that cannot be started or ends before that is "did not start" with the reason (a task's `internal`),
never a crash or a memory limit.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

app = typer.Typer(
    name="sark-node",
    help="Benchmark ML models across a fleet of real devices, peer to peer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_TOPICS = ("local", "swarm", "owner", "campaign", "stored", "report", "proof", "serve", "service", "schema")


def _print_version(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print version, commit, build kind."
        ),
    ] = False,
) -> None:
    """Benchmark ML models across a fleet of real devices, peer to peer."""


@app.command()
def version() -> None:
    """Print the sark-node version, the commit it was built from and how it was installed."""
    from node.build import current

    typer.echo(current().line())


def _register() -> None:
    for topic in _TOPICS:
        importlib.import_module(f"node.cli.{topic}").register(app)


def main() -> None:
    """Entry point of the `sark-node` console script. Ctrl-C anywhere: one line, exit 130."""
    from node.cli.options import InterruptedExit, interrupted

    try:
        _register()
        app()
    except KeyboardInterrupt:  # while the commands load, before typer runs
        interrupted()
    except SystemExit as exc:  # typer turns a KeyboardInterrupt into a silent exit 130
        if exc.code == 130 and not isinstance(exc, InterruptedExit):
            interrupted()
        raise


__all__ = ["app", "main"]
