"""Options and plumbing every command shares: configuration, running trio, exit codes.

Light on purpose: every command module imports this one while the CLI starts, so it loads only typer.
What a command needs (trio, pydantic, libp2p, onnxruntime, matplotlib) is imported when it runs.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn, TypeVar

import typer

from node.errors import ConfigError, Interrupted, NodeError

if TYPE_CHECKING:
    import trio

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


OnDeviceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--endpoint-on-device",
        help="a declared server that runs on this device, NAME=UNIT (e.g. gpu_torch): its energy is read "
        "with that unit's method; repeatable",
    ),
]


def endpoints_on_device(flags: list[str] | None) -> dict[str, str] | None:
    """`--endpoint-on-device NAME=UNIT` flags as NAME -> unit name (None when none is given)."""
    if not flags:
        return None
    from protocol import ComputeUnit

    units = {key: unit.value for unit in ComputeUnit for key in (unit.value.lower(), unit.name.lower())}
    on_device: dict[str, str] = {}
    for flag in flags:
        name, sep, unit = flag.partition("=")
        if not sep or not name or unit.strip().lower() not in units:
            known = ", ".join(u.name.lower() for u in ComputeUnit)
            fail(f"error: --endpoint-on-device: expected NAME=UNIT ({known}), got {flag!r}", 2)
        on_device[name] = units[unit.strip().lower()]
    return on_device


def build_config(file: Path | None, **flags: Any) -> NodeConfig:
    """The node's configuration from file, environment and flags; exits 2 on bad input."""
    from node.config import load_config

    try:
        check_flags(flags)
        config = load_config(file, os.environ, **flags)
        check_settings(config)
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)
    return config


def check_flags(flags: Mapping[str, Any]) -> None:
    """The address and peer-id flags checked as `join` reads them, each error naming its flag
    (`--gate` a multiaddr ending in `/p2p/<id>`, `--listen` a multiaddr, `--allow` a peer id; none
    with a control character).

    Raises:
        ConfigError: the first bad value, its field the flag.
    """
    from node.p2p.addrs import parse_gate, parse_multiaddr, parse_peer_id

    for addr in flags.get("listen") or ():
        parse_multiaddr(addr, field="--listen")
    for addr in flags.get("gates") or ():
        parse_gate(addr, field="--gate")
    for peer in flags.get("allow") or ():
        parse_peer_id(peer, field="--allow")


def check_settings(config: NodeConfig) -> None:
    """`check_flags` over the settings, wherever they came from (a file, `SARK_*`), each error naming
    the setting.

    Raises:
        ConfigError: the first bad value.
    """
    from node.p2p.addrs import parse_gate, parse_multiaddr, parse_peer_id

    for addr in config.listen:
        parse_multiaddr(addr, field="listen")
    for addr in config.gates:
        parse_gate(addr, field="gates")
    for peer in config.allow:
        parse_peer_id(peer, field="allow")


def guard(build: Callable[[], T]) -> T:
    """Run a synchronous step whose ConfigError means bad input (exit 2)."""
    try:
        return build()
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)


INTERRUPT_GRACE_S: Final = 10.0
"""How long a command that winds down on Ctrl-C (submit withdrawing its offers and leases) may take
before it is cancelled outright; a second Ctrl-C cancels it at once."""


class InterruptedExit(SystemExit):
    """Exit 130 after Ctrl-C, its one line already printed (`node.cli.main` prints "interrupted" for
    an exit 130 that typer made of a KeyboardInterrupt outside `run`)."""


def resume_flags(gates: list[str] | None, data_dir: Path | None, config_file: Path | None) -> str:
    """The node flags a command was given, to repeat in the `--resume` line."""
    words = [f"--gate {g}" for g in gates or ()]
    words += [f"--data-dir {data_dir}"] if data_dir else []
    words += [f"--config {config_file}"] if config_file else []
    return "".join(f" {w}" for w in words)


def interrupted(line: str = "interrupted") -> NoReturn:
    """One line on stderr, then exit 130: the user stopped the command (Ctrl-C), nothing failed."""
    typer.echo(line, err=True)
    raise InterruptedExit(130)


def run(
    main: Callable[[], Awaitable[T]],
    *,
    verbose: bool = False,
    stop: trio.Event | None = None,
    own_signals: bool = False,
) -> T:
    """Run an async command: bad input exits 2, a runtime failure 1, Ctrl-C 130 with one line.

    Ctrl-C sets `stop` when the command has one (it winds down and raises `Interrupted`, whose detail
    is the line printed), else cancels the command; a second Ctrl-C, or `INTERRUPT_GRACE_S` after the
    first, cancels it too. With `own_signals` the command receives SIGINT itself (`join`: the graceful
    leave, as on SIGTERM) and no watch is set over it: trio delivers a signal only to the receiver
    opened last, and a watch started beside the command would open after it and take its Ctrl-C.
    """
    import trio

    from protocol import ProtocolError

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        finished: list[T] = trio.run(_interruptible, main, stop, not own_signals)
    except Interrupted as exc:
        interrupted(f"interrupted: {exc.detail}")
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)
    except (NodeError, ProtocolError) as exc:
        fail(f"error: {exc.detail}", 1)
    except KeyboardInterrupt:  # before the Ctrl-C watch started, or after it ended
        interrupted()
    except BaseExceptionGroup as group:  # our error raised inside libp2p's or our own nurseries
        if group.split(_an_interrupt)[1] is None:  # only Ctrl-C and the cancellations it caused
            interrupted()
        ours = _first_ours(group)
        if ours is None:  # a bug: its cause first, in one line, then the traceback (the cause at its end)
            print(f"internal error (a bug): {_leaves(group)}; the traceback follows", file=sys.stderr)
            raise
        if isinstance(ours, Interrupted):
            interrupted(f"interrupted: {ours.detail}")
        fail(f"error: {ours.detail}", 2 if isinstance(ours, ConfigError) else 1)
    if not finished:
        interrupted()
    return finished[0]


async def _interruptible(main: Callable[[], Awaitable[T]], stop: trio.Event | None, watch: bool) -> list[T]:
    """`main`'s result in a list, or an empty list when Ctrl-C cancelled it. Its errors come out as
    they were raised, not wrapped in a group by the nursery of the Ctrl-C watch."""
    import trio

    result: list[T] = []
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        if watch:
            nursery.start_soon(_watch_ctrl_c, scope, stop)
        try:
            with scope:
                result.append(await main())
        except Exception as exc:  # raised again below, outside this nursery
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


async def _watch_ctrl_c(scope: trio.CancelScope, stop: trio.Event | None) -> None:
    """The first SIGINT sets `stop` (and arms the grace deadline); without one, or at the second, the
    command is cancelled."""
    import trio

    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if stop is None or stop.is_set():
                scope.cancel()
                return
            stop.set()
            scope.deadline = trio.current_time() + INTERRUPT_GRACE_S


def _an_interrupt(exc: BaseException) -> bool:
    import trio

    return isinstance(exc, KeyboardInterrupt | trio.Cancelled)


def _leaves(group: BaseExceptionGroup[BaseException], most: int = 3) -> str:
    """The errors inside nested exception groups but cancellations, each with where it was raised:
    `ValueError: why (file.py:12)`, at most `most`. The traceback of a nursery in a nursery is long,
    and its cause comes last, where a log cut short or a terminal's scrollback loses it."""
    import traceback

    import trio

    said: list[str] = []
    pending: list[BaseException] = [group]
    while pending and len(said) < most:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = exc.exceptions
        elif not isinstance(exc, trio.Cancelled):
            frames = traceback.extract_tb(exc.__traceback__)
            where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
            said.append(f"{type(exc).__name__}: {exc}{where}")
    return "; ".join(said) or "cancelled"


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
