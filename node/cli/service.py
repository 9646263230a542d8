"""`sark-node service install | uninstall | status`: the worker as a user service (systemd or launchd).

`install` takes `join`'s options and writes them into the node's config file (merged over what that
file already holds; the data folder pinned, so the service keeps this user's identity), or takes
`--config FILE` to run with a file of the owner's own (then no other option). It writes the unit
(`node/service.py` renders it), then, where a user manager answers, loads and (re)starts it; elsewhere
it prints the commands to run. `uninstall` stops, disables and removes the unit and keeps the config
file. `status` says whether the unit is installed, enabled and active, and where the logs are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from node.cli.options import (
    AllowNetOpt,
    ConfigOpt,
    DataDirOpt,
    EndpointOpt,
    GateOpt,
    JsonOpt,
    ListenOpt,
    as_tuple,
    check_flags,
    check_settings,
    declared_endpoints,
    fail,
    guard,
)

if TYPE_CHECKING:
    from node.service import ServicePaths

service_app = typer.Typer(
    help="Run `join` as a user service (systemd on Linux, launchd on macOS): install, uninstall, status.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
MANAGER_S = 30.0
"""Deadline of one systemctl or launchctl call."""


def _paths() -> ServicePaths:
    from node.service import ServicePaths, this_platform

    platform = this_platform()
    if platform is None:
        fail(f"error: no user service manager is supported on {sys.platform} (systemd or launchd)", 1)
    return ServicePaths.of(platform, os.environ, Path.home())


def _call(*argv: str) -> subprocess.CompletedProcess[str] | None:
    """Run a service-manager command; None when the tool is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    return subprocess.run(argv, capture_output=True, text=True, timeout=MANAGER_S, check=False)


def _manager_answers(paths: ServicePaths) -> bool:
    """Whether a user service manager is there to talk to (a container or an ssh session may have none)."""
    if paths.platform == "launchd":
        done = _call("launchctl", "print", f"gui/{os.getuid()}")
    else:
        done = _call("systemctl", "--user", "show", "--property=Version")
    return done is not None and done.returncode == 0


def _commands(paths: ServicePaths, action: str) -> list[tuple[str, ...]]:
    """The manager commands of `install` or `uninstall`, in order."""
    if paths.platform == "launchd":
        domain, target = f"gui/{os.getuid()}", f"gui/{os.getuid()}/{paths.unit.stem}"
        if action == "install":
            return [("launchctl", "bootout", target), ("launchctl", "bootstrap", domain, str(paths.unit))]
        return [("launchctl", "bootout", target)]
    name = paths.unit.name
    if action == "install":
        return [
            ("systemctl", "--user", "daemon-reload"),
            ("systemctl", "--user", "enable", name),
            ("systemctl", "--user", "restart", name),
        ]
    return [("systemctl", "--user", "disable", "--now", name)]


def _apply(commands: list[tuple[str, ...]], *, tolerate_first: bool = False) -> None:
    """Run the commands; a failure is exit 1 with the manager's own words (a first `bootout` of an agent
    that is not loaded may fail)."""
    for index, argv in enumerate(commands):
        done = _call(*argv)
        if done is not None and done.returncode != 0 and not (tolerate_first and index == 0):
            fail(f"error: {' '.join(argv)} failed: {(done.stderr or done.stdout).strip()}", 1)


RESETTABLE = {
    "gate": "gates",
    "allow": "allow",
    "listen": "listen",
    "device-name": "device_name",
    "price-per-hour": "price_per_hour",
    "allow-network": "allow_networks",
    "endpoint": "endpoints",
}
"""`--reset NAME`: the settings a flag fills, by the flag's name, that `install` can remove from the file."""


def _settings(paths: ServicePaths, flags: dict[str, Any], reset: list[str]) -> dict[str, Any]:
    """The config file's settings with the flags given over them (`--reset` ones removed), validated
    as `join` will read them."""
    from node.config import default_data_dir, load_config
    from node.errors import ConfigError

    merged: dict[str, Any] = {}
    if paths.config.is_file():
        import tomllib

        try:
            merged = tomllib.loads(paths.config.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            fail(f"error: cannot update {paths.config}: {exc}", 2)
    for name in reset:
        merged.pop(RESETTABLE[name], None)
    merged.update({k: v for k, v in flags.items() if v is not None})
    if flags["allow"] is not None and flags["open_mode"] is None:
        merged["open_mode"] = False  # --allow names who may submit: the file's --open goes
    merged.setdefault("data_dir", str(default_data_dir()))
    try:
        config = load_config(None, {}, **merged)
        check_settings(config)
    except ConfigError as exc:
        fail(f"error: {exc.detail}", 2)
    if not config.gates:
        fail("error: give at least one --gate (or --config FILE with gates in it)", 2)
    if not config.allow and not config.open_mode:
        typer.secho("warning: no --allow and no --open: this worker will decline every offer", err=True)
    return {k: str(v) if isinstance(v, Path) else v for k, v in merged.items()}


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write a file atomically, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    temp.chmod(mode)
    temp.replace(path)


def _verify(unit: bytes) -> None:
    """`systemd-analyze --user verify` on the unit, in a scratch folder, where the tool is installed:
    what it says about the unit is exit 1 with its words (nothing is written)."""
    import tempfile

    from node.service import UNIT_NAME

    if shutil.which("systemd-analyze") is None:
        return
    with tempfile.TemporaryDirectory(prefix="sark-node-verify-") as scratch:
        path, runtime = Path(scratch) / UNIT_NAME, Path(scratch) / "run"
        path.write_bytes(unit)
        runtime.mkdir(mode=0o700)  # the tool's manager needs a runtime folder; a private one will do
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        done = subprocess.run(
            ["systemd-analyze", "--user", "verify", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=MANAGER_S,
            check=False,
        )
        said = [ln for ln in (done.stdout + done.stderr).splitlines() if UNIT_NAME in ln or scratch in ln]
    if done.returncode != 0 or said:
        why = "; ".join(said) or (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        fail(f"error: systemd-analyze verify refused the unit (nothing written): {why}", 1)


def _flag_values(**given: Any) -> dict[str, Any]:
    """`install`'s options as config settings (None: not given, the file's value stays); the flags are
    checked as `join` checks them, each error naming its flag (exit 2)."""
    flags: dict[str, Any] = {
        "gates": as_tuple(given["gate_addrs"]),
        "allow": as_tuple(given["allow"]),
        "open_mode": given["open_mode"],
        "listen": as_tuple(given["listen"]),
        "data_dir": str(given["data_dir"].resolve()) if given["data_dir"] else None,
        "device_name": given["device_name"],
        "price_per_hour": given["price_per_hour"],
        "allow_networks": as_tuple(given["allow_network"]),
        "allow_http": given["allow_http"],
        "endpoints": declared_endpoints(given["endpoint"]),
        "calibrate": given["calibrate"],
    }
    guard(lambda: check_flags(flags))
    return flags


def _render(paths: ServicePaths, argv: tuple[str, ...], config_flag: bool) -> bytes:
    """The unit or the agent, its paths checked first (a control character: exit 2 naming its source)."""
    from node.service import check_words, render_plist, render_unit

    home = "XDG_CONFIG_HOME" if os.environ.get("XDG_CONFIG_HOME") and paths.platform == "systemd" else "HOME"
    named = {"the executable's path": argv[0], "--config" if config_flag else home: argv[-1]}
    if paths.logs is not None:
        named["HOME"] = str(paths.logs)
    guard(lambda: check_words(named))
    if paths.platform == "launchd":
        assert paths.logs is not None
        return render_plist(argv, paths.logs)
    unit = guard(lambda: render_unit(argv)).encode()  # an executable path systemd refuses: exit 2
    _verify(unit)
    return unit


def _config_and_settings(
    paths: ServicePaths, config_file: Path | None, flags: dict[str, Any], reset: list[str]
) -> tuple[Path, dict[str, Any] | None]:
    """The config file the service runs with, and the settings to write into it (None: the owner's
    own `--config FILE`, written by nobody here)."""
    unknown = sorted(set(reset) - RESETTABLE.keys())
    if unknown:
        fail(f"error: --reset: no such setting: {', '.join(unknown)} (one of {', '.join(RESETTABLE)})", 2)
    if config_file is None:
        return paths.config, _settings(paths, flags, reset)
    if any(v is not None for v in flags.values()) or reset:
        fail("error: give the settings either in --config FILE or as options, not both", 2)
    config = config_file.resolve()
    if not config.is_file():
        fail(f"error: no config file at {config}", 2)
    return config, None


OpenOpt = Annotated[
    bool | None, typer.Option("--open/--no-open", help="accept any submitter (--no-open: only --allow)")
]
HttpOpt = Annotated[
    bool | None, typer.Option("--allow-http/--no-allow-http", help="allow plain-http model URLs")
]
CalibrateOpt = Annotated[
    bool | None, typer.Option("--calibrate/--no-calibrate", help="calibrate the device at start")
]
ResetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--reset",
        help="remove a setting from the config file (back to its default): "
        f"{', '.join(RESETTABLE)}; repeatable",
    ),
]


def install(
    config_file: ConfigOpt = None,
    gate_addrs: GateOpt = None,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", help="submitter peer id to accept (replaces the list; sets --no-open)"),
    ] = None,
    open_mode: OpenOpt = None,
    listen: ListenOpt = None,
    data_dir: DataDirOpt = None,
    device_name: Annotated[str | None, typer.Option("--device-name", help="override the device name")] = None,
    price_per_hour: Annotated[
        float | None, typer.Option("--price-per-hour", help="what an hour of this device costs (advertised)")
    ] = None,
    allow_network: AllowNetOpt = None,
    allow_http: HttpOpt = None,
    endpoint: EndpointOpt = None,
    calibrate: CalibrateOpt = None,
    reset: ResetOpt = None,
    no_start: Annotated[
        bool, typer.Option("--no-start", help="write the files only; print the commands that start it")
    ] = False,
) -> None:
    """Install `join` as a user service that starts at login, restarts when it fails, and logs to the
    platform's logs. Give `join`'s options (written into the node's config file) or --config FILE.
    Each option replaces the file's value; --no-open, --no-allow-http, --reset NAME take one back.

    Every value is checked as `join` checks it, and the systemd unit by `systemd-analyze verify` where
    that tool is installed, before anything is written.

    Exit code: 0 installed, 1 systemd-analyze verify or the service manager refused, 2 bad options or
    settings.
    """
    from node.service import join_argv, node_command, render_config

    paths = _paths()
    flags = _flag_values(
        gate_addrs=gate_addrs,
        allow=allow,
        open_mode=open_mode,
        listen=listen,
        data_dir=data_dir,
        device_name=device_name,
        price_per_hour=price_per_hour,
        allow_network=allow_network,
        allow_http=allow_http,
        endpoint=endpoint,
        calibrate=calibrate,
    )
    config, settings = _config_and_settings(paths, config_file, flags, reset or [])
    argv = join_argv(node_command(sys.executable, bool(getattr(sys, "frozen", False))), config)
    unit = _render(paths, argv, config_file is not None)
    if paths.logs is not None:
        paths.logs.mkdir(parents=True, exist_ok=True)
    if settings is not None:
        _write(config, render_config(settings).encode(), mode=0o600)
    _write(paths.unit, unit)
    print(f"wrote {paths.unit}\nruns {' '.join(argv)}")
    _start(paths, no_start)


def _start(paths: ServicePaths, no_start: bool) -> None:
    """Start the installed service, or say how when asked not to or no user service manager answers."""
    commands = _commands(paths, "install")
    if no_start or not _manager_answers(paths):
        why = "as asked" if no_start else "no user service manager answers here"
        print(f"not started ({why}); to start it:\n" + "\n".join(f"  {' '.join(c)}" for c in commands))
        return
    _apply(commands, tolerate_first=paths.platform == "launchd")
    print(f"started; logs: {_logs_hint(paths)}")


def uninstall() -> None:
    """Stop and disable the user service and remove its unit; the node's config file and data stay."""
    paths = _paths()
    if _manager_answers(paths) and paths.unit.exists():
        _apply(_commands(paths, "uninstall"), tolerate_first=paths.platform == "launchd")
    if paths.unit.exists():
        paths.unit.unlink()
        print(f"removed {paths.unit}")
        if paths.platform == "systemd" and _manager_answers(paths):
            _apply([("systemctl", "--user", "daemon-reload")])
    else:
        print(f"not installed: no {paths.unit}")
    if paths.config.exists():
        print(f"kept {paths.config} (the node's settings; delete it yourself if you want them gone)")


def _state(paths: ServicePaths) -> tuple[str, str]:
    """(enabled, active) as the service manager says, or "unknown" with the reason."""
    if not _manager_answers(paths):
        tool = "launchd" if paths.platform == "launchd" else "systemd"
        return (f"unknown (no {tool} user manager answers)",) * 2
    if paths.platform == "launchd":
        done = _call("launchctl", "print", f"gui/{os.getuid()}/{paths.unit.stem}")
        if done is None or done.returncode != 0:
            return "no", "inactive"
        return "yes", "active" if "state = running" in done.stdout else "inactive"
    name = paths.unit.name
    enabled, active = (_call("systemctl", "--user", verb, name) for verb in ("is-enabled", "is-active"))
    return (
        (enabled.stdout.strip() or "unknown") if enabled is not None else "unknown",
        (active.stdout.strip() or "unknown") if active is not None else "unknown",
    )


def _logs_hint(paths: ServicePaths) -> str:
    if paths.logs is not None:
        return str(paths.logs)
    return f"journalctl --user -u {paths.unit.stem} -f"


def status(as_json: JsonOpt = False) -> None:
    """Say whether the user service is installed, enabled and active, and where its logs are."""
    paths = _paths()
    installed = paths.unit.exists()
    enabled, active = _state(paths) if installed else ("no", "inactive")
    facts = {
        "platform": paths.platform,
        "unit": str(paths.unit),
        "installed": installed,
        "enabled": enabled,
        "active": active,
        "config": str(paths.config),
        "logs": _logs_hint(paths),
    }
    if as_json:
        print(json.dumps(facts))
        return
    print(f"unit      {paths.unit} ({'installed' if installed else 'not installed'})")
    print(f"enabled   {enabled}\nactive    {active}\nconfig    {paths.config}\nlogs      {facts['logs']}")


def register(app: typer.Typer) -> None:
    """Add `service install`, `service uninstall` and `service status` to the CLI."""
    service_app.command()(install)
    service_app.command()(uninstall)
    service_app.command()(status)
    app.add_typer(service_app, name="service")


__all__ = ["register"]
