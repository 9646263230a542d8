"""Why a lookup found no worker: a reason code and a detail, so `peers` and `submit` never fail silently.

"No gate answered" is `open_node`'s `PeerUnreachable`; once connected, a lookup that found nobody
is one of the `NoWorkers` reasons below, built from what each DHT server said.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import final

from node.p2p.kad import ProviderLookup
from node.p2p.node import Node
from protocol import ComputeUnit


@final
class NoWorkers(enum.StrEnum):
    """Why no worker was found."""

    GATE_REFUSED = "gate_refused"
    """Every server we asked refused or failed the provider lookup."""
    NO_PROVIDER = "no_provider"
    """The servers answered, with no provider of the key."""
    NO_ANSWER = "no_answer"
    """Workers are listed as providers, but none gave a valid profile."""


@dataclass(frozen=True)
class Shortfall:
    """A reason code and a detail for people."""

    code: NoWorkers
    detail: str


def shortfall(lookup: ProviderLookup, what: str) -> Shortfall:
    """Explain an empty result from the provider lookup behind it (`what`: the unit asked for)."""
    if lookup.providers:
        return Shortfall(
            NoWorkers.NO_ANSWER,
            f"{len(lookup.providers)} peer(s) advertise {what}, but none answered /sark/profile "
            f"with a valid advert",
        )
    if lookup.failures and not lookup.answered:
        refusals = "; ".join(f"{peer}: {why}" for peer, why in sorted(lookup.failures.items()))
        return Shortfall(
            NoWorkers.GATE_REFUSED,
            f"the DHT servers refused or left unanswered our provider lookup ({refusals})",
        )
    return Shortfall(
        NoWorkers.NO_PROVIDER,
        f"no worker advertises {what}: {lookup.answered} DHT server(s) answered with no provider "
        "(a gate that refuses provider records answers so too: see the workers' join warnings)",
    )


async def why_no_workers(node: Node, unit: ComputeUnit | None = None) -> Shortfall:
    """Look the unit's providers up again and say why nobody was found."""
    lookup = await node.dht.lookup(unit)
    return shortfall(lookup, "any unit" if unit is None else unit.value)


__all__ = ["NoWorkers", "Shortfall", "shortfall", "why_no_workers"]
