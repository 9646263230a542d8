"""The worker as a service of the platform's user service manager: where its files go, and their text.

Linux: a systemd user unit, `$XDG_CONFIG_HOME/systemd/user/sark-node.service` (`~/.config/...` when the
variable is unset). macOS: a launchd agent, `~/Library/LaunchAgents/local.sark-node.plist`. Either runs
`sark-node join --config FILE` with the node's config file, restarts it when it fails (not when it exits
0, a graceful leave, nor, under systemd, 2: bad configuration, which a restart does not mend), every
`RESTART_S` for as long as it takes (systemd: no start limit, `StartLimitIntervalSec=0`; launchd's
`KeepAlive` never gives up; `join` itself waits out a gate outage, `node/p2p/gates.py`), and
stops it with SIGTERM, which `join` answers with a graceful leave. Logs go where the platform keeps
them: the journal (`journalctl --user -u sark-node`), or `~/Library/Logs/sark-node/`.

Pure but for `ServicePaths.of`, which reads the environment it is given: rendering is text in, text out.
"""

from __future__ import annotations

import plistlib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from node.errors import ConfigError

Platform = Literal["systemd", "launchd"]

UNIT_NAME: Final = "sark-node.service"
LABEL: Final = "local.sark-node"
CONFIG_NAME: Final = "node.toml"
RESTART_S: Final = 5
"""Pause before a failed worker is started again."""
STOP_S: Final = 15
"""How long the manager waits after SIGTERM before it kills (a graceful leave takes under 5 s)."""
_HEADER: Final = "Written by `sark-node service install`; `sark-node service uninstall` removes it."


@dataclass(frozen=True)
class ServicePaths:
    """Where the service's files are on this machine, for one platform."""

    platform: Platform
    unit: Path
    """The systemd unit or the launchd plist."""
    config: Path
    """The node's config file that `install` writes (unless given one) and the service runs with."""
    logs: Path | None
    """launchd: the folder of the log files; systemd: None (the journal)."""

    @classmethod
    def of(cls, platform: Platform, env: Mapping[str, str], home: Path) -> ServicePaths:
        """The paths for a platform, from the environment (`XDG_CONFIG_HOME`) and the home folder."""
        if platform == "launchd":
            return cls(
                platform,
                home / "Library" / "LaunchAgents" / f"{LABEL}.plist",
                home / "Library" / "Application Support" / "sark-node" / CONFIG_NAME,
                home / "Library" / "Logs" / "sark-node",
            )
        config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        return cls(
            platform,
            config_home / "systemd" / "user" / UNIT_NAME,
            config_home / "sark-node" / CONFIG_NAME,
            None,
        )


def this_platform() -> Platform | None:
    """The service manager this operating system uses, or None where no service is supported."""
    if sys.platform == "darwin":
        return "launchd"
    if sys.platform.startswith("linux"):
        return "systemd"
    return None


def node_command(executable: str, frozen: bool) -> tuple[str, ...]:
    """The command that starts this very `sark-node`: a frozen binary is its own executable; a pip install
    runs the `sark-node` script beside its interpreter (the venv's `bin/`, unresolved: a venv's python is
    a link), else the interpreter with `-m node.cli`.

    Args:
        executable: `sys.executable`.
        frozen: `sys.frozen` (PyInstaller and the like).
    """
    if frozen:
        return (executable,)
    script = Path(executable).parent / ("sark-node.exe" if executable.endswith(".exe") else "sark-node")
    if script.is_file():
        return (str(script),)
    return (executable, "-m", "node.cli")


def join_argv(command: Sequence[str], config: Path) -> tuple[str, ...]:
    """The service's whole command line: `join` with the node's config file."""
    return (*command, "join", "--config", str(config))


def check_words(named: Mapping[str, str]) -> None:
    """Paths that go into a unit or a plist, by where they come from (a flag, an environment variable):
    no control character (a newline would start a new line of the unit: another `ExecStart=`; XML 1.0
    cannot hold one at all) and valid UTF-8.

    Raises:
        ConfigError: the first that is not, its field the source.
    """
    for source, word in named.items():
        if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in word):
            raise ConfigError(source, f"a control character in {word!r}: it cannot go into a service file")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(source, f"not valid UTF-8: {word!r}") from None


_UNSAFE_EXECUTABLE: Final = re.compile(r"[\\\"'\x00-\x1f\x7f]")
"""What systemd refuses in an executable's path ("Executable name contains special characters")."""


def _systemd_word(word: str, *, executable: bool = False) -> str:
    """One ExecStart word, quoted: systemd reads `%` as a specifier everywhere and `$` as a variable in
    the arguments (not in the executable, which may hold no quote, backslash or control character).

    Raises:
        ConfigError: an executable path systemd would refuse.
    """
    if executable:
        if _UNSAFE_EXECUTABLE.search(word):
            raise ConfigError("executable", f"systemd cannot run a path with quotes or backslashes: {word!r}")
        return '"' + word.replace("%", "%%") + '"'
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def render_unit(argv: Sequence[str]) -> str:
    """The systemd user unit that runs `argv` (see the module), as text.

    Raises:
        ConfigError: the executable's path holds characters systemd refuses there, or a word a
            control character (`check_words`).
    """
    check_words({f"word {i}": w for i, w in enumerate(argv)})
    command = " ".join(_systemd_word(w, executable=i == 0) for i, w in enumerate(argv))
    return f"""\
# {_HEADER}
[Unit]
Description=sark-node worker: runs benchmarks for the swarm's allowed submitters
StartLimitIntervalSec=0

[Service]
Type=exec
ExecStart={command}
Environment=PYTHONUNBUFFERED=1
Restart=on-failure
RestartSec={RESTART_S}
RestartPreventExitStatus=2
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec={STOP_S}
StandardOutput=journal
StandardError=journal
SyslogIdentifier=sark-node

[Install]
WantedBy=default.target
"""


def render_plist(argv: Sequence[str], logs: Path) -> bytes:
    """The launchd agent that runs `argv` (see the module), as plist XML.

    launchd has no "do not restart on exit 2": a bad configuration is retried every `ThrottleInterval`.

    Raises:
        ConfigError: a word or the logs' path holds a control character (`check_words`), which XML
            cannot carry (plistlib would raise ValueError).
    """
    check_words({**{f"word {i}": w for i, w in enumerate(argv)}, "logs": str(logs)})
    agent: dict[str, Any] = {
        "Label": LABEL,
        "ProgramArguments": list(argv),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": RESTART_S * 2,
        "ExitTimeOut": STOP_S,
        "ProcessType": "Background",
        "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
        "StandardOutPath": str(logs / "join.log"),
        "StandardErrorPath": str(logs / "join.err.log"),
    }
    return plistlib.dumps(agent, sort_keys=False)


def render_config(settings: Mapping[str, object]) -> str:
    """A node config file (TOML) holding `settings`: strings, numbers, booleans, lists of strings and
    one level of string tables (`endpoints`). JSON's string escapes are TOML's basic-string escapes."""
    import json

    lines = [f"# sark-node settings for `join` (NodeConfig). {_HEADER.split(';')[0]}."]
    tables: list[str] = []
    for name, value in settings.items():
        if isinstance(value, Mapping):
            tables += ["", f"[{name}]", *(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())]
        else:
            lines.append(f"{name} = {json.dumps(list(value) if isinstance(value, tuple) else value)}")
    return "\n".join([*lines, *tables]) + "\n"


__all__ = [
    "LABEL",
    "UNIT_NAME",
    "Platform",
    "ServicePaths",
    "check_words",
    "join_argv",
    "node_command",
    "render_config",
    "render_plist",
    "render_unit",
    "this_platform",
]
