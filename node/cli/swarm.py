"""`sark-node gate`, `join`, `peers`: the libp2p swarm from the command line."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from node.cli.options import (
    AllowHttpOpt,
    AllowNetOpt,
    ConfigOpt,
    DataDirOpt,
    EndpointOpt,
    EventsOpt,
    GateOpt,
    JsonOpt,
    ListenOpt,
    OnDeviceOpt,
    TtlOpt,
    as_tuple,
    build_config,
    declared_endpoints,
    endpoints_on_device,
    fail,
    guard,
    run,
)
from node.errors import ConfigError
from node.events import json_lines, quiet

if TYPE_CHECKING:
    from node.config import NodeConfig
    from node.p2p.node import Peer
    from node.p2p.survey import Shortfall
    from node.worker.role import WorkerHandle
    from protocol import DeviceProfile
    from scheduler.verification.challenge import Measured

    Challenged = dict[str, tuple[Measured, ...]]


RelayAllowOpt = Annotated[
    list[str] | None,
    typer.Option("--relay-allow", help="peer id that may reserve a relay slot (default: any); repeatable"),
]
MaxConnectionsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-connections",
        min=2,
        max=65_536,
        help="connections held at once (default 2048, about 1,000 workers); past it a new one is closed "
        "before its handshake, which the dialler names",
    ),
]
MaxReservationsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-reservations",
        min=1,
        max=65_536,
        help="relay slots held at once, one per NAT'd worker (default 1024); past it a worker is told "
        "the relay is full",
    ),
]

MaxPerAddressOpt = Annotated[
    int | None,
    typer.Option(
        "--max-per-address",
        min=1,
        max=65_536,
        help="inbound connections one address may hold (default a sixteenth of --max-connections); past "
        "it a new one from there is closed before its handshake",
    ),
]

PlacesOpt = Annotated[
    int | None,
    typer.Option(
        "--places-per-network",
        min=1,
        max=20,
        help="provider records of one key kept from one network (/24, /48; default 4 from a public "
        "address, loopback and private ones exempt); set, loopback and private networks count too",
    ),
]


def gate(
    listen: ListenOpt = None,
    addrs_file: Annotated[Path | None, typer.Option("--addrs-file", help="write our multiaddrs here")] = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    record_ttl: TtlOpt = None,
    relay_allow: RelayAllowOpt = None,
    max_connections: MaxConnectionsOpt = None,
    max_reservations: MaxReservationsOpt = None,
    max_per_address: MaxPerAddressOpt = None,
    places_per_network: PlacesOpt = None,
    events: EventsOpt = False,
) -> None:
    """Run a gate: DHT server and bootstrap, circuit relay v2, reachability dial-back."""
    from functools import partial

    import trio

    from gate import serve_gate
    from node.p2p.addresscap import per_address_default
    from node.p2p.node import connection_cap
    from node.p2p.places import places_said
    from node.p2p.relay import GATE_RESERVATIONS

    config = build_config(
        config_file,
        listen=as_tuple(listen),
        data_dir=data_dir,
        record_ttl_s=record_ttl,
        max_connections=max_connections,
        max_reservations=max_reservations,
        max_per_address=max_per_address,
        places_per_network=places_per_network,
    )
    cap = connection_cap(config, "gate")
    slots = config.max_reservations or GATE_RESERVATIONS

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            allowed = frozenset(relay_allow) if relay_allow else None
            addrs = await nursery.start(partial(serve_gate, relay_allow=allowed), config)
            if addrs_file is not None:
                addrs_file.write_text("".join(f"{a}\n" for a in addrs))
            if events:
                peer_id = addrs[0].rsplit("/p2p/", 1)[-1]
                share = config.max_per_address or per_address_default(cap)
                ready = {"max_connections": cap, "max_reservations": slots, "max_per_address": share,
                         "places_per_network": places_said(config.places_per_network)}  # fmt: skip
                json_lines("ready", role="gate", peer_id=peer_id, addrs=addrs, **ready)
            else:
                print("\n".join(addrs), flush=True)

    run(main)


ProfileFileOpt = Annotated[Path | None, typer.Option("--profile", help="use this DeviceProfile JSON")]
PriceOpt = Annotated[
    float | None,
    typer.Option("--price-per-hour", help="what an hour of this device costs, advertised to submitters"),
]


def join(
    gate_addrs: GateOpt = None,
    allow: Annotated[list[str] | None, typer.Option("--allow", help="submitter peer id to accept")] = None,
    open_mode: Annotated[bool, typer.Option("--open", help="accept any submitter")] = False,
    listen: ListenOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    record_ttl: TtlOpt = None,
    device_name: Annotated[str | None, typer.Option("--device-name", help="override the device name")] = None,
    price_per_hour: PriceOpt = None,
    profile_file: ProfileFileOpt = None,
    allow_network: AllowNetOpt = None,
    allow_http: AllowHttpOpt = False,
    allow_code_models: Annotated[
        bool,
        typer.Option("--allow-code-models", help="accept torch.export / TorchScript models (they run code)"),
    ] = False,
    heartbeat: Annotated[float | None, typer.Option("--heartbeat", help="seconds between heartbeats")] = None,
    lease_ttl: Annotated[
        float | None, typer.Option("--lease-ttl", help="lease lifetime without heartbeat")
    ] = None,
    no_calibrate: Annotated[bool, typer.Option("--no-calibrate", help="skip the device calibration")] = False,
    endpoint: EndpointOpt = None,
    on_device: OnDeviceOpt = None,
    owner_key: Annotated[
        Path | None,
        typer.Option("--owner-key", help="your owner key (sark-node owner new): your devices are one vote"),
    ] = None,
    events: EventsOpt = False,
) -> None:
    """Join the swarm as a worker: detect this device, advertise it, run benchmarks for allowed submitters.

    SIGTERM or SIGINT is a graceful leave (exit 0 within seconds): no more offers, each unfinished lease
    handed back with a signed release (the submitter offers it elsewhere at once), the advert withdrawn.
    While no gate answers it keeps trying, 1 s to 30 s apart, one line per attempt.
    """
    config = build_config(
        config_file,
        gates=as_tuple(gate_addrs),
        allow=as_tuple(allow),
        open_mode=open_mode or None,
        listen=as_tuple(listen),
        data_dir=data_dir,
        record_ttl_s=record_ttl,
        device_name=device_name,
        price_per_hour=price_per_hour,
        allow_networks=as_tuple(allow_network),
        allow_http=allow_http or None,
        allow_code_models=allow_code_models or None,
        heartbeat_s=heartbeat,
        lease_ttl_s=lease_ttl,
        calibrate=False if no_calibrate else None,
        endpoints=declared_endpoints(endpoint),
        endpoints_on_device=endpoints_on_device(on_device),
        owner_key=owner_key,
    )
    _check_joinable(config)
    profile = guard(lambda: _profile(profile_file)) if profile_file is not None else None
    run(lambda: _serve_worker(config, profile, events), own_signals=True)  # Ctrl-C is the leave too
    gc.freeze()  # left: the interpreter's last full collection took 1.5 s of a 2 s exit, and frees nothing


def _check_joinable(config: NodeConfig) -> None:
    """Exit 2 without a gate; warn when no submitter may use this worker (no --allow, no --open)."""
    if not config.gates:
        fail("error: give at least one --gate", 2)
    if not config.allow and not config.open_mode:
        typer.secho(
            "warning: no --allow and no --open: this worker will decline every offer",
            fg=typer.colors.YELLOW,
            err=True,
        )


async def _serve_worker(config: NodeConfig, profile: DeviceProfile | None, events: bool) -> None:
    """Run the worker role after one `ready` event line (or one line for people) until SIGTERM or SIGINT,
    then leave gracefully: leases handed back, advert withdrawn, host closed (`node/worker/leave.py`)."""
    from node.worker.leave import serve_until_signalled
    from node.worker.role import open_worker

    sink = json_lines if events else quiet
    left = await serve_until_signalled(
        open_worker(config, profile, events=sink),
        lambda worker: _announce(worker, config, events),
        events=sink,
    )
    if events:
        return
    if left is None:
        print("stopped before joining the swarm", flush=True)
    else:
        print(f"left the swarm in {left.seconds:g} s; leases handed back: {len(left.released)}", flush=True)


def _announce(worker: WorkerHandle, config: NodeConfig, events: bool) -> None:
    """The `ready` event line (or the `joined` line for people), after a warning per refusing gate and
    one when no submitter could dial this worker."""
    from node.p2p.addrs import undialable
    from node.p2p.node import connection_cap

    adv = worker.advertised
    for gate_addr in adv.refused_by:
        typer.secho(
            f"warning: gate {gate_addr} refused or dropped our provider records: "
            "submitters that use only this gate will not find this worker",
            fg=typer.colors.YELLOW,
            err=True,
        )
    why = undialable(adv.addrs, adv.circuit_addrs, config.gates)
    if why is not None:
        typer.secho(
            f"warning: no submitter can dial this worker: {why} (listen: {', '.join(config.listen)})",
            fg=typer.colors.YELLOW,
            err=True,
        )
    if events:
        json_lines(
            "ready",
            role="worker",
            peer_id=adv.peer_id,
            addrs=list(adv.addrs),
            circuit_addrs=list(adv.circuit_addrs),
            reachability=adv.reachability,
            refused_by=list(adv.refused_by),
            endpoints=[e.model_dump(mode="json") for e in worker.profile.endpoints],
            max_connections=connection_cap(config, "worker"),  # P33: its cap, as a gate's line says
        )
    else:
        print(
            f"joined as {adv.peer_id} ({adv.reachability}); units: "
            f"{', '.join(u.value for u in worker.profile.usable_units()) or 'none'}"
            f"{_served(worker.profile)}",
            flush=True,
        )


def _served(profile: DeviceProfile) -> str:
    """The declared servers' model ids for the `joined` line, or why a server serves none."""
    from protocol import visible

    parts = [
        f"{e.name}: {e.model or '-'}" + ("" if e.usable else f" ({e.reason})") for e in profile.endpoints
    ]
    return visible(f"; served models: {', '.join(parts)}") if parts else ""  # a server's reason, shown


def _profile(profile_file: Path) -> DeviceProfile:
    """The profile in `profile_file`, checked like any advert (no control characters, bounded lengths)."""
    from pydantic import ValidationError

    from protocol import DeviceProfile, field_problems

    try:
        return DeviceProfile.model_validate_json(profile_file.read_text())
    except ValidationError as exc:
        problems = "; ".join(field_problems(exc, root="profile"))
        raise ConfigError("--profile", f"cannot use {profile_file}: {problems}") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError("--profile", f"cannot use {profile_file}: {exc}") from exc


def show_id(
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
) -> None:
    """Print this node's peer id (created on first use): what a worker's owner passes to --allow."""
    from node.datadir import data_folder
    from node.p2p.identity import identity_peer_id

    data = guard(lambda: data_folder(config_file, os.environ, data_dir))  # no pydantic: starts at once
    print(guard(lambda: identity_peer_id(data.key_file)))


def peers(
    gate_addrs: GateOpt = None,
    as_json: JsonOpt = False,
    data_dir: DataDirOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="lookup deadline, seconds")] = 5.0,
    challenge: Annotated[
        bool,
        typer.Option("--challenge", help="challenge each peer's claimed CPU and GPU speeds (seconds each)"),
    ] = False,
) -> None:
    """List the workers the DHT shows: peer id, owner, device, usable units, reachability, advert age; and
    the records this data folder's submitter keeps of peers it compared (why one is distrusted, and
    on whose evidence). `--challenge`: each peer's claims measured by the challenge, measured against
    claimed per unit with the verdict (`node.cli.peerchallenge`). It runs as this data folder's
    submitter (`--data-dir`, else the default one `submit` uses), so the workers that take its offers
    answer its challenge.

    Exit code: 1 with the cause its own lookup met when no worker was found (no gate answered, the
    gate refused our lookups, no worker advertises, none answered, the lookup ran past `--timeout`:
    `node.p2p.survey.explain`), 2 for bad input.
    """
    from node.p2p.node import open_node
    from node.p2p.survey import explain

    # as the submitter: its identity (workers answer a challenge only from submitters they take offers
    # from) and its data folder, where the records below are too; nothing is left anywhere else
    config: NodeConfig = build_config(
        None, gates=as_tuple(gate_addrs), data_dir=data_dir, listen=("/ip4/127.0.0.1/tcp/0",)
    )
    if not config.gates:
        fail("error: give at least one --gate", 2)

    async def main() -> tuple[list[Peer], Shortfall | None, Challenged | None]:
        async with open_node(config, role="submitter") as node:
            look = await node.look(timeout=timeout)
            why = None if look.peers else explain(look, "any unit")  # by what this look met
            if not challenge:
                return look.peers, why, None
            from node.cli.peerchallenge import challenge_peers

            return look.peers, why, await challenge_peers(node, look.peers)

    from node.cli.records import record_rows
    from node.datadir import data_folder

    found, why, challenged = run(main)
    records = record_rows(data_folder(None, os.environ, data_dir).campaigns)
    _print_peers(found, records, as_json, challenged)
    if why is not None:
        fail(f"error: no worker found ({why.code.value}): {why.detail}", 1)


WHOLE_IDS_WIDTH = 150
"""The console width from which `peers` prints whole peer ids; narrower: their ends."""


def _peer_rows(found: list[Peer]) -> list[dict[str, Any]]:
    """What `peers` says of each worker found (`peers --json`'s `peers`): its owner as its advert's
    statement names it (`protocol.owner_of`: "" none declared, or refused with why), its class and claim."""
    from node.submitter.discovery import claims_of, home_class
    from protocol import owner_of

    claims = claims_of([p.advert.profile for p in found])
    owners = [owner_of(p.advert.owner, p.peer_id) for p in found]
    return [
        {
            "peer_id": p.peer_id,
            "owner": owner.owner_id,
            "owner_refused": owner.refused,
            "class": home_class(p.advert.profile).name,
            "class_id": home_class(p.advert.profile).id,  # what a price rule names (whole)
            "claim": "claim_unverified: " + "; ".join(claim) if claim else "",
            "device": p.advert.profile.device_name,
            "units": [u.value for u in p.advert.profile.usable_units()],
            "reachability": p.advert.reachability,
            "age_s": round(p.age_s, 2),
            "addrs": list(p.dial_addrs()),
            "endpoints": [e.model_dump(mode="json") for e in p.advert.profile.endpoints],
            "calibration": (
                p.advert.profile.calibration.model_dump(mode="json") if p.advert.profile.calibration else None
            ),
        }
        for p, claim, owner in zip(found, claims, owners, strict=True)
    ]


def _print_peers(
    found: list[Peer], records: list[dict[str, Any]], as_json: bool, tested: Challenged | None
) -> None:
    from node.cli.console import console as out_console
    from node.cli.console import id_tail
    from node.cli.peerchallenge import attach, print_table

    rows = _peer_rows(found)
    attach(rows, tested)  # each row's challenged units, with --challenge
    if as_json:
        print(json.dumps({"peers": rows, "records": records}), flush=True)
        return
    from rich.table import Table

    from protocol import for_rich

    out = out_console()
    whole = out.width >= WHOLE_IDS_WIDTH  # narrower: each id's end (`peers --json` has them whole)
    table = Table(
        "peer id",
        "owner",
        "device",
        "class",
        "units",
        "served models",
        "reach",
        "age",
        "CPU GFLOPS",
        "mem GB/s",
    )
    table.columns[0].no_wrap = True
    for r in rows:
        cal = r["calibration"] or {}
        table.add_row(
            for_rich(str(r["peer_id"]) if whole else id_tail(str(r["peer_id"]))),
            f"[red]{for_rich(r['owner_refused'])}[/red]" if r["owner_refused"] else (r["owner"] or "-"),
            for_rich(str(r["device"])) + (f"\n[red]{for_rich(r['claim'])}[/red]" if r["claim"] else ""),
            r["class"],
            ", ".join(r["units"]),
            for_rich(", ".join(e["model"] for e in r["endpoints"] if e["usable"]) or "-"),
            for_rich(str(r["reachability"])),
            f"{r['age_s']:.1f} s",
            (f"{cal['cpu_gflops']:.1f}" + ("" if cal["quiet"] else " (under load)")) if cal else "-",
            f"{cal.get('mem_bandwidth_gbs', 0):.1f}" if cal else "-",
        )
    out.print(table)
    print_table(tested, whole)
    from node.cli.records import print_records

    print_records(records)


def register(app: typer.Typer) -> None:
    """Add `gate`, `join` and `peers` to the CLI."""
    app.command()(gate)
    app.command()(join)
    app.command()(peers)
    app.command(name="id")(show_id)
