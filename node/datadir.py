"""The node's data folder: where it is, every path under it, and the settings file that may name it.

Light on purpose (no pydantic): `sark-node id` needs only the folder, and resolves it here as
`load_config` would (flag, then `SARK_DATA_DIR`, then the settings file's `data_dir`, then the
platform's folder) without building the whole configuration. `node.config` re-exports `DataDir` and
`default_data_dir`, and reads the settings file through `read_settings`; tests/labs/cli/test_data_folder.py
pins that both ways find the same folder.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final

import platformdirs

from node.errors import ConfigError

APP_NAME: Final = "sark-node"
LEGACY_DATA_DIR: Final = ".sark-node"
"""The data folder of earlier versions, under the home folder: still used where it is the one that exists."""
DATA_DIR_ENV: Final = "SARK_DATA_DIR"
"""The environment variable `load_config` reads for the `data_dir` setting (`SARK_<FIELD>`)."""


def default_data_dir() -> Path:
    """The platform's user data folder for sark-node (platformdirs: `$XDG_DATA_HOME/sark-node` or
    `~/.local/share/sark-node` on Linux, `~/Library/Application Support/sark-node` on macOS,
    `%LOCALAPPDATA%\\sark-node` on Windows), or `~/.sark-node` when that exists and the former does not.
    """
    standard = platformdirs.user_data_path(APP_NAME, appauthor=False)
    legacy = Path.home() / LEGACY_DATA_DIR
    if legacy.is_dir() and not standard.exists():
        return legacy
    return standard


@final
@dataclass(frozen=True)
class DataDir:
    """Every path under one node's data folder: nobody else joins names onto the folder.

    Attributes:
        root: the data folder itself.
    """

    root: Path

    @property
    def key_file(self) -> Path:
        """The node's persistent Ed25519 identity (a 32-byte seed, mode 0600)."""
        return self.root / "identity.key"

    @property
    def campaigns(self) -> Path:
        """The submitter's SQLite campaign store."""
        return self.root / "campaigns.sqlite"

    @property
    def results(self) -> Path:
        """Where `serve` writes each campaign's results folder unless told otherwise."""
        return self.root / "results"

    @property
    def models(self) -> Path:
        """The content-addressed model cache."""
        return self.root / "models"

    @property
    def outbox(self) -> Path:
        """A worker's signed results not yet acknowledged by their submitter."""
        return self.root / "outbox"

    @property
    def calibration(self) -> Path:
        """The device calibration cache that `info` and `join` share."""
        return self.root / "profile"

    def embedded(self, node: str) -> Path:
        """The data folder of one node of the embedded local swarm (`gate`, `worker-0`, ...)."""
        return self.root / "embedded" / node

    def embedded_keys(self, prefix: str) -> list[Path]:
        """The identity keys of the embedded swarm's nodes whose names start with `prefix` (those started)."""
        return sorted(p for p in (self.root / "embedded").glob(f"{prefix}*/identity.key") if p.is_file())


def read_settings(file: Path) -> dict[str, Any]:
    """The settings in a TOML file (JSON if it ends in `.json`), unchecked.

    Raises:
        ConfigError: the file is unreadable, not TOML/JSON, or not a table.
    """
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigError("config file", f"cannot read {file}: {exc.strerror}") from exc
    try:
        data = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("config file", f"{file} is not valid: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError("config file", f"{file} must hold a table of settings")
    return data


def data_folder(file: Path | None, env: Mapping[str, str], flag: Path | None) -> DataDir:
    """The data folder `load_config` would choose: `flag`, `SARK_DATA_DIR`, the file's `data_dir`,
    or `default_data_dir()`. Only `data_dir` is read from the file; its other settings are not checked.

    Raises:
        ConfigError: the file is unreadable or invalid, or its `data_dir` is not a string.
    """
    if flag is not None:
        return DataDir(flag)
    if (named := env.get(DATA_DIR_ENV)) is not None:
        return DataDir(Path(named))
    settings = read_settings(file) if file is not None else {}
    if "data_dir" not in settings:
        return DataDir(default_data_dir())
    if not isinstance(settings["data_dir"], str):
        raise ConfigError("config", f"config.data_dir: expected a path, got {settings['data_dir']!r}")
    return DataDir(Path(settings["data_dir"]))


__all__ = ["APP_NAME", "DATA_DIR_ENV", "DataDir", "data_folder", "default_data_dir", "read_settings"]
