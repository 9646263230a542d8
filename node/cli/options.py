"""Options and plumbing every command shares: configuration, running trio, exit codes.

Light on purpose: every command module imports this one while the CLI starts, so it loads only typer.
What a command needs (trio, pydantic, libp2p, onnxruntime, matplotlib) is imported when it runs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from node.errors import ConfigError, NodeError

if TYPE_CHECKING:
    from node.config import NodeConfig
    from protocol import ProtocolError

T = TypeVar("T")

GateOpt = Annotated[
    list[str] | None, typer.Option("--gate", help="gate multiaddr with /p2p/<id>; repeatable")
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="identity, caches and state")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML or JSON settings file")]
ListenOpt = Annotated[list[str] | None, typer.Option("--listen", help="multiaddr to listen on; repeatable")]
TtlOpt = Annotated[float | None, typer.Option("--record-ttl", help="advert/provider lifetime, seconds")]
EventsOpt = Annotated[bool, typer.Option("--events", help="print JSON event lines on stdout")]
JsonOpt = Annotated[bool, typer.Option("--json", help="one JSON document on stdout")]
AllowNetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-network", help="CIDR that model URLs may point into despite the SSRF rules; repeatable"
    ),
]
AllowHttpOpt = Annotated[bool, typer.Option("--allow-http", help="allow plain-http model URLs")]


def fail(message: str, code: int) -> NoReturn:
    """One red line on stderr, then exit with `code` (2: bad input or config, 1: runtime failure).

    The line passes the terminal seam (`protocol.visible`): a peer's or a file's text in it is shown.
    """
    from protocol import visible

    typer.secho(visible(message), fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def as_tuple(values: list[str] | None) -> tuple[str, ...] | None:
    """A repeatable option as a config tuple (None: not given)."""
    return tuple(values) if values else None


EndpointOpt = Annotated[
    list[str] | None,
    typer.Option("--endpoint", help="a local model server to offer, NAME=URL (OpenAI API); repeatable"),
]


def declared_endpoints(flags: list[str] | None) -> dict[str, str] | None:
    """`--endpoint NAME=URL` flags as a mapping (None when none is given: the config file's stand)."""
    if not flags:
        return None
    declared: dict[str, str] = {}
    for flag in flags:
        name, sep, url = flag.partition("=")
        if not sep or not name or not url:
            fail(f"error: --endpoint: expected NAME=URL, got {flag!r}", 2)
        declared[name] = url
    return declared


def build_config(file: Path | None, **flags: Any) -> NodeConfig:
    """The node's configuration from file, environment and flags; exits 2 on bad input."""
    from node.config import load_config
    from node.p2p.addrs import parse_multiaddr

    try:
        config = load_config(file, os.environ, **flags)
        for addr in (*config.listen, *config.gates):
            parse_multiaddr(addr, field="address")
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)
    return config


def guard(build: Callable[[], T]) -> T:
    """Run a synchronous step whose ConfigError means bad input (exit 2)."""
    try:
        return build()
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)


def run(main: Callable[[], Awaitable[T]], *, verbose: bool = False) -> T:
    """Run an async command: bad input exits 2, a runtime failure 1, Ctrl-C quietly (130)."""
    import trio

    from protocol import ProtocolError

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return trio.run(main)
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)
    except (NodeError, ProtocolError) as exc:
        fail(f"error: {exc.detail}", 1)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BaseExceptionGroup as group:  # our error raised inside libp2p's or our own nurseries
        ours = _first_ours(group)
        if ours is None:
            raise
        fail(f"error: {ours.detail}", 2 if isinstance(ours, ConfigError) else 1)


def _first_ours(group: BaseExceptionGroup[BaseException]) -> NodeError | ProtocolError | None:
    """The first of our own errors inside nested exception groups, if that is all they hold but
    cancellations (a nursery that failed on our error cancels its other tasks)."""
    import trio

    from protocol import ProtocolError

    found = group.subgroup(lambda e: isinstance(e, NodeError | ProtocolError))
    rest = group.subgroup(  # the condition sees the groups too: only leaves count
        lambda e: not isinstance(e, BaseExceptionGroup | NodeError | ProtocolError | trio.Cancelled)
    )
    if found is None or rest is not None:
        return None
    leaf: BaseException | None = found
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, NodeError | ProtocolError) else None
