"""The `sark-node` command line: one typer app, commands registered by topic.

Modules:
    local     info, bench: this device only, no network
    swarm     gate, join, peers, id: the libp2p swarm
    campaign  submit, plan, status, cancel, results: running campaigns
    options   the options and plumbing every command shares
    exits     the exit code of a finished campaign (0 all placeable tasks done, 1 any failed)
    report    report: re-render a stored campaign (html, csv, json, md), or diff two campaigns
    serve     serve: the orchestrator's REST API and a live dashboard
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="sark-node",
    help="Benchmark ML models across a fleet of real devices, peer to peer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_TOPICS = ("local", "swarm", "campaign", "report", "serve")


@app.callback()
def _root() -> None:
    """Benchmark ML models across a fleet of real devices, peer to peer."""


@app.command()
def version() -> None:
    """Print the sark-node version."""
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("sark-node"))


def _register() -> None:
    for topic in _TOPICS:
        importlib.import_module(f"node.cli.{topic}").register(app)


def main() -> None:
    """Entry point of the `sark-node` console script."""
    _register()
    app()


__all__ = ["app", "main"]
