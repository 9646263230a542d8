"""`sark-node serve`: the original orchestrator's REST API and a live dashboard over a submitter node."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from node.cli.options import (
    AllowHttpOpt,
    AllowNetOpt,
    ConfigOpt,
    DataDirOpt,
    EventsOpt,
    GateOpt,
    as_tuple,
    build_config,
    fail,
    guard,
    resume_flags,
    run,
)
from node.errors import Interrupted
from node.events import json_lines, quiet

HttpOpt = Annotated[str, typer.Option("--http", help="HOST:PORT to serve on (port 0: any free port)")]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", envvar="SARK_HTTP_TOKEN", help="bearer token every request must carry"),
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="results folder (default DATA_DIR/results)")]
WorkersOpt = Annotated[int, typer.Option("--workers", help="local workers in the embedded swarm (no --gate)")]
RefreshOpt = Annotated[float, typer.Option("--refresh", help="seconds between peer-view refreshes")]
AllowedHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="a Host name to answer to besides the bound address (NAME or NAME:PORT; repeatable)",
    ),
]
AllowOriginOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-origin",
        help="a web origin (scheme://host[:port]) whose pages may call the API (repeatable)",
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="log what the node does")]


def serve(
    http: HttpOpt = "127.0.0.1:5000",
    token: TokenOpt = None,
    gate_addrs: GateOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    out: OutOpt = None,
    workers: WorkersOpt = 1,
    refresh: RefreshOpt = 2.0,
    allow_network: AllowNetOpt = None,
    allow_http: AllowHttpOpt = False,
    allowed_host: AllowedHostOpt = None,
    allow_origin: AllowOriginOpt = None,
    events: EventsOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Serve the orchestrator's REST API under /api and a live dashboard at / (loopback by default)."""
    import trio

    from node.cli.embedded import embedded_swarm
    from node.http import ServeOptions, build_app, open_state, serve_http

    host, port = _bind(http, token)
    allowed_hosts, allow_origins = tuple(allowed_host or ()), tuple(allow_origin or ())
    _check_admission(allowed_hosts, allow_origins)
    config = build_config(
        config_file,
        gates=as_tuple(gate_addrs),
        data_dir=data_dir,
        allow_networks=as_tuple(allow_network),
        allow_http=allow_http or None,
    )
    sink = json_lines if events else quiet
    from node.submitter.discovery import DiscoveryConfig

    stop = trio.Event()
    options = ServeOptions(
        results_dir=out or config.data.results,
        events=sink,
        discovery=DiscoveryConfig(),
        refresh_s=refresh,
        swarm=partial(embedded_swarm, workers=workers),
        allowed_hosts=allowed_hosts,
        allow_origins=allow_origins,
        key_source=os.environ.get,  # only the variables a posted campaign names are read
        stop=stop,
    )

    async def main() -> None:
        async with open_state(config, options) as state, trio.open_nursery() as nursery:
            url = await nursery.start(serve_http, build_app(state, token), host, port)
            sink("http", url=url, port=int(url.rsplit(":", 1)[1]), peer_id=state.node.host.peer_id)
            if not events:
                typer.echo(f"serving {url}/api and the dashboard at {url}/", err=True)
            await stop.wait()  # Ctrl-C: running campaigns withdraw their tasks before the node goes
            stopped = await state.wind_down()
            nursery.cancel_scope.cancel()
        raise Interrupted(stopped_line(stopped, resume_flags(gate_addrs, data_dir, config_file)))

    run(main, verbose=verbose, stop=stop)


def stopped_line(campaign_ids: list[str], flags: str) -> str:
    """What `serve` says on Ctrl-C: the campaigns it stopped and how to go on with each."""
    if not campaign_ids:
        return "stopped serving"
    if len(campaign_ids) == 1:
        cid = campaign_ids[0]
        return (
            f"stopped serving; campaign {cid} stopped, its leases released; "
            f"resume it with: sark-node submit --resume {cid}{flags}"
        )
    ids = ", ".join(campaign_ids)
    return (
        f"stopped serving; campaigns {ids} stopped, their leases released; "
        f"resume each with: sark-node submit --resume ID{flags}"
    )


def _bind(http: str, token: str | None) -> tuple[str, int]:
    """The address to serve on; exits 2 for a bad one, or a non-loopback one without a token."""
    from node.http import UnsafeBind, check_bind, parse_bind

    host, port = guard(lambda: parse_bind(http))
    try:
        check_bind(host, token)
    except UnsafeBind as exc:
        fail(f"error: {exc.detail}", 2)
    return host, port


def _check_admission(allowed_hosts: tuple[str, ...], allow_origins: tuple[str, ...]) -> None:
    """Exits 2 for a malformed --allowed-host or --allow-origin."""
    from node.http import admission

    guard(lambda: admission(allowed_hosts, allow_origins))


def register(app: typer.Typer) -> None:
    """Add the serve command to the CLI."""
    app.command()(serve)
