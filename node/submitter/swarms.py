"""Which swarm a campaign runs on: recorded when it starts, gone back to when it is resumed.

A campaign's store record holds the gates it last ran on, or `embedded` (the embedded local swarm of
`submit` with no gate). `submit --resume` runs it there again: a fleet campaign resumed with no gate
configured goes back to its gates and reclaims its leases from the fleet, never from a local swarm.
A gate from the configuration (a `--config` file, `SARK_GATES`) that differs from the record is
refused, naming both; `--gate` on the command line is the explicit choice and moves the campaign.

A campaign stored by an older sark-node has no record. Its tasks name the peers that took them: if
every one is a worker of this data folder's embedded swarm, it ran there; if any other peer took one,
it ran on a fleet, and with no gate configured the resume is refused (the gates are unknown); if no
peer ever took a task, nothing says where it ran, and a resume without a gate is refused too.
"""

from __future__ import annotations

from collections.abc import Iterable

from node.config import EMBEDDED, NodeConfig, Swarm, named, swarm_of
from node.errors import ConfigError
from node.p2p.identity import identity_peer_id
from node.submitter.store import CampaignRecord


class SwarmMismatch(ConfigError):
    """`--resume` would run a campaign on another swarm than the one it ran on (bad input: exit 2)."""

    def __init__(self, campaign_id: str, recorded: Swarm, configured: Swarm) -> None:
        super().__init__(
            "--gate",
            f"campaign {campaign_id} ran on {named(recorded)}, but this command is configured for "
            f"{named(configured)}; resume it with no gate configured to go back to its swarm, or give "
            "--gate on the command line to move it",
        )


class SwarmUnknown(ConfigError):
    """An old campaign without a swarm record, and nothing to say where it ran (exit 2)."""

    def __init__(self, campaign_id: str, why: str) -> None:
        super().__init__(
            "--gate",
            f"campaign {campaign_id} was stored by an older sark-node that did not record its swarm, and "
            f"{why}: give --gate GATE to resume it on a fleet, or submit its file again",
        )


def resume_config(
    record: CampaignRecord, config: NodeConfig, peers: Iterable[str], *, explicit: bool
) -> NodeConfig:
    """The configuration that resumes `record` on the swarm it ran on.

    Args:
        record: the stored campaign.
        config: this command's configuration.
        peers: every peer that took one of the campaign's tasks (for an old record: see the module).
        explicit: `--gate` was given on the command line: the campaign moves there, unchecked.

    Raises:
        SwarmMismatch: the configuration names another swarm than the record.
        SwarmUnknown: an old record, no gate configured, and no sign of the embedded swarm.
    """
    if explicit:
        return config
    recorded = record.swarm if record.swarm is not None else _guessed(record, config, set(peers))
    if recorded is None:  # an old fleet campaign: only the configuration can say where
        return config
    if config.gates and config.gates != recorded:
        raise SwarmMismatch(record.campaign_id, recorded, swarm_of(config))
    return config if recorded == (EMBEDDED,) else config.with_(gates=recorded)


def _guessed(record: CampaignRecord, config: NodeConfig, peers: set[str]) -> Swarm | None:
    """An old record's swarm: embedded when only this folder's embedded workers took its tasks; None
    (the configuration's gates) when other peers did and a gate is configured."""
    if peers and peers <= embedded_workers(config):
        return (EMBEDDED,)
    if config.gates:
        return None
    why = "a peer outside this machine's embedded swarm took its tasks" if peers else "no worker took a task"
    raise SwarmUnknown(record.campaign_id, why)


def embedded_workers(config: NodeConfig) -> set[str]:
    """The peer ids of the embedded swarm's workers that this data folder has started."""
    return {identity_peer_id(key) for key in config.data.embedded_keys("worker-")}
