"""`sark-node gate`, `join`, `peers`: the libp2p swarm from the command line."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import trio
import typer

from node.config import NodeConfig, load_config
from node.errors import ConfigError, NodeError
from node.host import parse_multiaddr
from node.swarm import Node, Peer, open_node, serve_worker
from protocol import DeviceProfile, Load, ProtocolError

GateOpt = Annotated[
    list[str] | None, typer.Option("--gate", help="gate multiaddr with /p2p/<id>; repeatable")
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="identity, caches and state")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML or JSON settings file")]
ListenOpt = Annotated[list[str] | None, typer.Option("--listen", help="multiaddr to listen on; repeatable")]
TtlOpt = Annotated[float | None, typer.Option("--record-ttl", help="advert/provider lifetime, seconds")]
EventsOpt = Annotated[bool, typer.Option("--events", help="print JSON event lines on stdout")]


def _fail(message: str, code: int) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def _config(file: Path | None, **flags: Any) -> NodeConfig:
    config = load_config(file, os.environ, **flags)
    for addr in (*config.listen, *config.gates):
        parse_multiaddr(addr, field="address")
    return config


def _run(main: Callable[[], Awaitable[None]]) -> None:
    """Run an async command: bad input exits 2, a runtime failure 1, Ctrl-C quietly."""
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        trio.run(main)
    except ConfigError as exc:
        _fail(f"error: {exc.detail}", 2)
    except (NodeError, ProtocolError) as exc:
        _fail(f"error: {exc.detail}", 1)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def gate(
    listen: ListenOpt = None,
    addrs_file: Annotated[Path | None, typer.Option("--addrs-file", help="write our multiaddrs here")] = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    record_ttl: TtlOpt = None,
    events: EventsOpt = False,
) -> None:
    """Run a gate: DHT server and bootstrap, circuit relay v2, reachability dial-back."""
    from gate import serve_gate

    config = _guard(
        lambda: _config(config_file, listen=_tuple(listen), data_dir=data_dir, record_ttl_s=record_ttl)
    )

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(serve_gate, config)
            if addrs_file is not None:
                addrs_file.write_text("".join(f"{a}\n" for a in addrs))
            if events:
                _emit("ready", role="gate", peer_id=addrs[0].rsplit("/p2p/", 1)[-1], addrs=addrs)
            else:
                print("\n".join(addrs), flush=True)

    _run(main)


def join(
    gate_addrs: GateOpt = None,
    allow: Annotated[list[str] | None, typer.Option("--allow", help="submitter peer id to accept")] = None,
    open_mode: Annotated[bool, typer.Option("--open", help="accept any submitter")] = False,
    listen: ListenOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    record_ttl: TtlOpt = None,
    profile_file: Annotated[
        Path | None, typer.Option("--profile", help="use this DeviceProfile JSON")
    ] = None,
    events: EventsOpt = False,
) -> None:
    """Join the swarm as a worker: detect this device, advertise it, keep the advert fresh."""
    config = _guard(
        lambda: _config(
            config_file,
            gates=_tuple(gate_addrs),
            allow=_tuple(allow),
            open_mode=open_mode or None,
            listen=_tuple(listen),
            data_dir=data_dir,
            record_ttl_s=record_ttl,
        )
    )
    if not config.gates:
        _fail("error: give at least one --gate", 2)
    profile = _guard(lambda: _profile(config, profile_file))

    async def main() -> None:
        async with open_node(config, role="worker") as node, trio.open_nursery() as nursery:
            adv = await nursery.start(_serve, node, profile)
            if events:
                _emit(
                    "ready",
                    role="worker",
                    peer_id=adv.peer_id,
                    addrs=list(adv.addrs),
                    circuit_addrs=list(adv.circuit_addrs),
                    reachability=adv.reachability,
                )
            else:
                print(f"joined as {adv.peer_id} ({adv.reachability})", flush=True)

    _run(main)


async def _serve(node: Node, profile: DeviceProfile, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    await serve_worker(node, profile, Load, task_status=task_status)


def _profile(config: NodeConfig, profile_file: Path | None) -> DeviceProfile:
    if profile_file is not None:
        try:
            return DeviceProfile.model_validate_json(profile_file.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError("--profile", f"cannot use {profile_file}: {exc}") from exc
    import drivers  # lazily: heavy runtimes load only for a worker that probes

    detect = getattr(drivers, "detect_profile", None)
    if detect is None:
        raise ConfigError("--profile", "this build cannot detect the device yet; pass --profile FILE")
    profile: DeviceProfile = detect(config.data_dir / "cache", calibrate=config.calibrate)
    return profile


def peers(
    gate_addrs: GateOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document on stdout")] = False,
    data_dir: DataDirOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="lookup deadline, seconds")] = 5.0,
) -> None:
    """List the workers the DHT shows: peer id, device, usable units, reachability, advert age."""
    flags: dict[str, Any] = {
        "gates": _tuple(gate_addrs),
        "data_dir": data_dir,
        "listen": ("/ip4/127.0.0.1/tcp/0",),
    }
    if data_dir is None:
        flags["data_dir"] = Path(os.environ.get("TMPDIR", "/tmp")) / f"sark-peers-{os.getpid()}"
    config = _guard(lambda: _config(None, **flags))
    if not config.gates:
        _fail("error: give at least one --gate", 2)

    async def main() -> None:
        async with open_node(config, role="submitter") as node:
            found = await node.find_workers(timeout=timeout)
        _print_peers(found, as_json)

    _run(main)


def _print_peers(found: list[Peer], as_json: bool) -> None:
    rows: list[dict[str, Any]] = [
        {
            "peer_id": p.peer_id,
            "device": p.advert.profile.device_name,
            "units": [u.value for u in p.advert.profile.usable_units()],
            "reachability": p.advert.reachability,
            "age_s": round(p.age_s, 2),
            "addrs": list(p.dial_addrs()),
        }
        for p in found
    ]
    if as_json:
        print(json.dumps({"peers": rows}), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("peer id", "device", "units", "reach", "age")
    for r in rows:
        table.add_row(
            str(r["peer_id"]),
            str(r["device"]),
            ", ".join(r["units"]),
            str(r["reachability"]),
            f"{r['age_s']:.1f} s",
        )
    Console().print(table)


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return tuple(values) if values else None


def _guard(build: Callable[[], Any]) -> Any:
    try:
        return build()
    except ConfigError as exc:
        _fail(f"error: {exc.detail}", 2)


def register(app: typer.Typer) -> None:
    """Add `gate`, `join` and `peers` to the CLI."""
    app.command()(gate)
    app.command()(join)
    app.command()(peers)


__all__ = ["register"]
