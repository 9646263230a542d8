"""Why a lookup found no worker: a reason code and a detail, so `peers` and `submit` never fail silently.

"No gate answered" is `open_node`'s `PeerUnreachable`; once connected, a lookup that found nobody
is one of the `NoWorkers` reasons below, built from what each DHT server said. A look that found
nobody (`Node.look`: `peers`) is explained by its own lookup (`explain`), and `submit`'s discovery by
what its own looks listed (`node.submitter.discovery`); one explained by a second lookup said "none
answered /sark/profile" of providers that lookup found and nobody had asked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import final

from node.p2p.kad import ProviderLookup
from node.p2p.node import Look


@final
class NoWorkers(enum.StrEnum):
    """Why no worker was found."""

    GATE_REFUSED = "gate_refused"
    """Every server we asked refused or failed the provider lookup."""
    NO_PROVIDER = "no_provider"
    """The servers answered, with no provider of the key."""
    NO_ANSWER = "no_answer"
    """Workers are listed as providers, but none gave a valid profile."""
    TIMED_OUT = "timed_out"
    """The provider lookup itself did not end within the look's deadline."""


@dataclass(frozen=True)
class Shortfall:
    """A reason code and a detail for people."""

    code: NoWorkers
    detail: str


def unanswered(providers: int, what: str) -> Shortfall:
    """`providers` were listed and asked, and none gave a valid advert."""
    return Shortfall(
        NoWorkers.NO_ANSWER,
        f"{providers} peer(s) advertise {what}, but none answered /sark/profile with a valid advert",
    )


def shortfall(lookup: ProviderLookup, what: str) -> Shortfall:
    """Explain an empty result from the provider lookup behind it (`what`: the unit asked for)."""
    if lookup.providers:
        return unanswered(len(lookup.providers), what)
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


def explain(look: Look, what: str) -> Shortfall:
    """Why `look` found nobody, from its own lookup (`what`: the unit asked for)."""
    if look.lookup is None:
        return Shortfall(
            NoWorkers.TIMED_OUT,
            f"the DHT servers did not finish the provider lookup for {what} within {look.timeout_s:g} s "
            "(--timeout)",
        )
    why = shortfall(look.lookup, what)
    if why.code is NoWorkers.NO_ANSWER and not look.ended:
        return Shortfall(why.code, f"{why.detail} within {look.timeout_s:g} s (--timeout)")
    return why


__all__ = ["NoWorkers", "Shortfall", "explain", "shortfall", "unanswered"]
