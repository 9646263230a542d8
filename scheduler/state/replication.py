"""A replicated job's placement: its tasks in groups of `verify.replicas`, each group one device
class on distinct peers and hosts (`replicas.pick_replicas` over placement's ranking).

`devices:` counts groups (figures), not tasks: `any` is one group, `n` is n groups, `all` makes as
many full groups as the feasible peers allow, each peer in at most one (a class whose peers cannot
fill a group is left out). A job with spot checks (`verify.spot_check`) is placed as an unreplicated
one: each task is its own group, and the machine adds a replica when the draw says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from protocol import ComputeUnit
from scheduler.language.verify import Verify
from scheduler.verification.classes import DeviceClass, device_class
from scheduler.verification.networks import network_of
from scheduler.verification.peers import Advertised
from scheduler.verification.replicas import Candidate, pick_replicas


class Placeable(Protocol):
    """A ranked peer as grouping reads it (placement's `Ranked` is one; placement calls this module,
    so this module names what it reads rather than importing placement back)."""

    @property
    def peer(self) -> Advertised: ...


PlacedT = TypeVar("PlacedT", bound=Placeable)


def candidate(peer: Advertised, unit: ComputeUnit, verify: Verify) -> Candidate:
    """A peer as a replica candidate: its host's network (`networks.network_of`). With `same_host:
    allow` its identity stands for its network, so any two peers pair (the lab's way around one
    machine; the row says so)."""
    host = peer.peer_id if verify.same_host == "allow" else network_of(peer.host)
    return Candidate(peer.peer_id, device_class(peer.profile, unit), host)


def place_groups(
    matching: Sequence[PlacedT], devices: str | int, unit: ComputeUnit, verify: Verify
) -> tuple[tuple[PlacedT, ...], int, str]:
    """The chosen peers group after group, how many tasks are wanted, and why fewer (or "")."""
    size = verify.replicas
    by_id = {r.peer.peer_id: r for r in matching}
    candidates = [candidate(r.peer, unit, verify) for r in matching]
    limit = 1 if devices == "any" else len(matching) if devices == "all" else int(devices)
    chosen: list[PlacedT] = []
    taken: set[str] = set()
    for _ in range(limit):
        got = pick_replicas(candidates, size, taken=taken)
        if len(got) < size and devices == "all" and chosen:
            break  # every full group is placed; the rest of the peers make none
        chosen.extend(by_id[c.peer_id] for c in got)
        taken.update(c.peer_id for c in got)
        if len(got) < size:
            break  # a partial group is the last: no class has more independent peers
    groups = limit if devices != "all" else max(1, -(-len(chosen) // size))
    wanted = size * groups
    shortfall = ""
    if len(chosen) < wanted:
        shortfall = (
            f"verify.replicas: {size} peers of one device class on distinct networks per task "
            "(IPv4 /24, IPv6 /64, loopback one; a relayed peer none); "
            f"{len(chosen)} of {wanted} replicas placed"
        )
    return tuple(chosen), wanted, shortfall


def class_of(peer: Advertised, unit: ComputeUnit) -> DeviceClass:
    """A peer's class for a unit (what a replica group records)."""
    return device_class(peer.profile, unit)
