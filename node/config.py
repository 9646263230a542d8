"""Node configuration, one frozen model built once in the CLI, and `DataDir`, its data folder's paths.

The configuration comes from a file, then the environment (`SARK_*`), then flags. `DataDir` is the one
owner of every path under the node's data folder.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, final

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from node.errors import ConfigError
from protocol import ProfileName, field_problems

_TUPLE_FIELDS = ("listen", "gates", "allow", "allow_networks")
APP_NAME: Final = "sark-node"
LEGACY_DATA_DIR: Final = ".sark-node"
"""The data folder of earlier versions, under the home folder: still used where it is the one that exists."""


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


class NodeConfig(BaseModel):
    """Everything a node's behaviour depends on; passed down, never read from the environment again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir)
    listen: tuple[str, ...] = ("/ip4/0.0.0.0/tcp/0",)
    gates: tuple[str, ...] = ()
    device_name: ProfileName | None = None  # checked like the profile it goes into
    allow: tuple[str, ...] = ()
    open_mode: bool = False
    dht_mode: Literal["auto", "server", "client"] = "auto"
    heartbeat_s: float = Field(default=2.0, gt=0)
    lease_ttl_s: float = Field(default=10.0, gt=0)
    record_ttl_s: float = Field(default=300.0, gt=0, le=3600)
    reannounce_s: float | None = Field(default=None, gt=0)
    max_streams_per_peer: int = Field(default=8, ge=1, le=256)
    first_frame_s: float = Field(default=5.0, gt=0, le=60)  # an inbound stream's first frame, or reset
    max_offer_lifetime_s: float = Field(default=600.0, gt=0, le=86_400)  # expires_at - issued_at
    max_queue: int = Field(default=4, ge=0)
    allow_code_models: bool = False
    allow_networks: tuple[str, ...] = ()
    allow_http: bool = False
    upload_peers: int = Field(default=4, ge=1, le=64)
    max_model_bytes: int = Field(default=2 << 30, gt=0)
    calibrate: bool = True
    endpoints: dict[ProfileName, str] = Field(default_factory=dict)  # declared model servers: NAME -> URL
    endpoint_probe_s: float = Field(default=300.0, gt=0)  # how often a worker probes them again

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not 0 < len(name) <= 64 or not url.startswith(("http://", "https://")):
                raise ValueError(f"expected NAME=http(s)://host:port, got {name}={url}")
        return value

    @field_validator("listen", "gates")
    @classmethod
    def _multiaddrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for addr in value:
            if not addr.startswith("/") or "//" in addr:
                raise ValueError(f"not a multiaddr: {addr!r}")
        return value

    def with_(self, **changes: object) -> NodeConfig:
        """A copy with some settings changed, validated like the original (a misspelt name is an error).

        Raises:
            ConfigError: a name that is no setting, or an invalid value.
        """
        try:
            return NodeConfig.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            raise ConfigError("config", "; ".join(field_problems(exc, root="config"))) from exc

    def reannounce_interval(self) -> float:
        """How often a worker re-puts its advert and re-provides: well inside the record lifetime."""
        return self.reannounce_s if self.reannounce_s is not None else self.record_ttl_s / 3

    @property
    def data(self) -> DataDir:
        """Every path under this node's data folder."""
        return DataDir(self.data_dir)

    def key_file(self) -> Path:
        """The node's persistent Ed25519 identity."""
        return self.data.key_file


def _from_file(file: Path) -> dict[str, Any]:
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


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in NodeConfig.model_fields:
        raw = env.get(f"SARK_{name.upper()}")
        if raw is None:
            continue
        out[name] = tuple(p for p in raw.split(",") if p) if name in _TUPLE_FIELDS else raw
    return out


def load_config(file: Path | None, env: Mapping[str, str], **flags: Any) -> NodeConfig:
    """Build the configuration: file, then environment (`SARK_<FIELD>`), then flags (None = unset).

    Raises:
        ConfigError: unreadable file or an invalid value; the field path is named.
    """
    merged: dict[str, Any] = _from_file(file) if file is not None else {}
    merged.update(_from_env(env))
    merged.update({k: v for k, v in flags.items() if v is not None})
    try:
        return NodeConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError("config", "; ".join(field_problems(exc, root="config"))) from exc


__all__ = ["DataDir", "NodeConfig", "default_data_dir", "load_config"]
