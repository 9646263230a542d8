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
    report    report: re-render a stored campaign (html, csv, json, md), or diff two campaigns
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

_TOPICS = ("local", "swarm", "owner", "campaign", "stored", "report", "serve", "service", "schema")


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
