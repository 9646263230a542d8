"""Node configuration, one frozen model built once in the CLI.

The configuration comes from a file, then the environment (`SARK_*`), then flags. `DataDir`, the one
owner of every path under the node's data folder, and `default_data_dir` live in the light
`node.datadir` (no pydantic, for `sark-node id`) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from node.datadir import DataDir, default_data_dir, read_settings
from node.errors import ConfigError
from protocol import MAX_PRICE_PER_HOUR, ComputeUnit, ProfileName, field_problems

_TUPLE_FIELDS = ("listen", "gates", "allow", "allow_networks")


class NodeConfig(BaseModel):
    """Everything a node's behaviour depends on; passed down, never read from the environment again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir)
    listen: tuple[str, ...] = ("/ip4/0.0.0.0/tcp/0",)
    gates: tuple[str, ...] = ()
    device_name: ProfileName | None = None  # checked like the profile it goes into
    # what the owner asks per hour of this device, advertised in its profile (`join --price-per-hour`)
    price_per_hour: float | None = Field(default=None, ge=0, le=MAX_PRICE_PER_HOUR, allow_inf_nan=False)
    allow: tuple[str, ...] = ()
    open_mode: bool = False
    dht_mode: Literal["auto", "server", "client", "reachable"] = "auto"
    """auto: a worker serves the DHT once a dial-back reached it and the swarm is large (more than about
    140 workers: `node.p2p.shards.large_swarm`); reachable: once a dial-back reached it; server: always;
    client: never."""
    heartbeat_s: float = Field(default=2.0, gt=0)
    lease_ttl_s: float = Field(default=10.0, gt=0)
    # 1800 s (refreshed every 450-600 s): at 10,000 devices with reachable ones serving, a serving
    # device's kad traffic, its own and the others' it carries, stays under 1 KB/s
    # (benchmarks/notes/swarm_sim.md). A departed device stays listed up to this long: liveness is the
    # lease's, and a submitter confirms each worker live before it counts it.
    record_ttl_s: float = Field(default=1800.0, gt=0, le=3600)
    reannounce_s: float | None = Field(default=None, gt=0)
    max_streams_per_peer: int = Field(default=8, ge=1, le=256)
    # Connections the host holds at once, in and out (py-libp2p's own bounds set to it, P33). None: a
    # gate's GATE_CONNECTIONS, another node's NODE_CONNECTIONS (node/p2p/host.py says what each costs).
    max_connections: int | None = Field(default=None, ge=2, le=65_536)
    # Relay slots a gate holds at once, one per NAT'd worker that joined it (node/p2p/relay.py). None:
    # GATE_RESERVATIONS.
    max_reservations: int | None = Field(default=None, ge=1, le=65_536)
    # Inbound connections one address may hold (node/p2p/addresscap.py). None: a sixteenth of the cap.
    max_per_address: int | None = Field(default=None, ge=1, le=65_536)
    # Provider records of one key a DHT server of ours keeps from one network (/24, /48;
    # node/p2p/places.py). None: 4 from a global address, local addresses exempt; set, local ones count.
    places_per_network: int | None = Field(default=None, ge=1, le=20)
    first_frame_s: float = Field(default=5.0, gt=0, le=60)  # an inbound stream's first frame, or reset
    max_offer_lifetime_s: float = Field(default=600.0, gt=0, le=86_400)  # expires_at - issued_at
    max_queue: int = Field(default=4, ge=0)
    allow_code_models: bool = False
    allow_networks: tuple[str, ...] = ()
    allow_http: bool = False
    upload_peers: int = Field(default=4, ge=1, le=64)
    max_model_bytes: int = Field(default=2 << 30, gt=0)
    calibrate: bool = True
    # where the device probe's facts and units are kept for the next start on an unchanged machine
    # (`drivers.probe.cache`); None: the data folder's `profile/`, beside the calibration
    probe_cache: Path | None = None
    endpoints: dict[ProfileName, str] = Field(default_factory=dict)  # declared model servers: NAME -> URL
    endpoint_probe_s: float = Field(default=300.0, gt=0)  # how often a worker probes them again
    # Declared servers that run on this device (gray-box energy): NAME -> the unit whose energy source
    # (drivers.measuring.energy) covers the server's hardware. Any other server's energy is not read.
    endpoints_on_device: dict[ProfileName, ComputeUnit] = Field(default_factory=dict)
    # the device owner's key (`join --owner-key`, `node.ownerkey`): its statement goes in the advert, so
    # a submitter counts this owner's devices as one vote in a quorum; None: the device is its own owner
    owner_key: Path | None = None

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not 0 < len(name) <= 64 or not url.startswith(("http://", "https://")):
                raise ValueError(f"expected NAME=http(s)://host:port, got {name}={url}")
        return value

    @model_validator(mode="after")
    def _on_device_are_declared(self) -> NodeConfig:
        unknown = sorted(self.endpoints_on_device.keys() - self.endpoints.keys())
        if unknown:
            raise ValueError(f"endpoints_on_device names no declared endpoint: {', '.join(unknown)}")
        return self

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
    merged: dict[str, Any] = read_settings(file) if file is not None else {}
    merged.update(_from_env(env))
    merged.update({k: v for k, v in flags.items() if v is not None})
    try:
        return NodeConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError("config", "; ".join(field_problems(exc, root="config"))) from exc


__all__ = ["DataDir", "NodeConfig", "default_data_dir", "load_config"]


EMBEDDED: Final = "embedded"
"""The swarm of a campaign run on the embedded local swarm (no gate), as the store records it."""

Swarm = tuple[str, ...]
"""A campaign's swarm as the store records it: its gate multiaddrs, or (`EMBEDDED`,)."""


def swarm_of(config: NodeConfig) -> Swarm:
    """The swarm a submitter with this configuration runs on."""
    return config.gates or (EMBEDDED,)


def named(swarm: Swarm) -> str:
    """A swarm in words, for a message."""
    if swarm == (EMBEDDED,):
        return "the embedded local swarm (no gate)"
    return ("gate " if len(swarm) == 1 else "gates ") + ", ".join(swarm)
