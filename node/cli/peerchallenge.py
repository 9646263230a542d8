"""`sark-node peers --challenge`: every listed peer's claims measured by the challenge, and shown.

Each peer's profile claims (its CPU's `cpu_claim`: `cpu_gflops` or its fp32 peak; each GPU's
`gpu_tflops`) are challenged as a campaign's would be (`node.submitter.challenge.Challenger.measure`,
a fresh secret key of this run): `CONCURRENCY` peers at a time, peers on one host one after another
(their products would share its cores), each within `PEER_S`. What comes back is each unit's claimed
and measured figure and its verdict: `borne out`, `refused` (too slow, or its rows wrong) or `not
answered` (gone, busy, an older version), with why. Without the flag `peers` challenges nobody and is
as fast as its lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # `peers` without the flag imports none of these (the scheduler alone is 0.4 s)
    from node.p2p.node import Node, Peer
    from scheduler import PeerView
    from scheduler.verification.challenge import Measured

CONCURRENCY: Final = 4
"""Peers challenged at once (on distinct hosts)."""
PEER_S: Final = 120.0
"""One peer's whole challenge, every unit (a CPU's and a GPU's: 45 s each at most)."""


async def challenge_peers(node: Node, found: Sequence[Peer]) -> dict[str, tuple[Measured, ...]]:
    """Each found peer's claims challenged from `node` (see the module docstring), by peer id."""
    import trio

    import scheduler as sch
    from node.submitter.challenge import Challenger, by_host, open_challenge
    from node.submitter.run import fresh_key

    challenger = Challenger(fresh_key(), partial(open_challenge, node.host))
    addrs = {p.peer_id: p.dial_addrs() for p in found}
    views = [
        sch.PeerView(peer_id=p.peer_id, profile=p.advert.profile, host=_host(p.dial_addrs())) for p in found
    ]
    limiter = trio.CapacityLimiter(CONCURRENCY)
    results: dict[str, tuple[Measured, ...]] = {}

    async def one(view: PeerView) -> None:
        async with limiter:
            results[view.peer_id] = _late(view)
            with trio.move_on_after(PEER_S):
                results[view.peer_id] = await challenger.measure(view, addrs[view.peer_id])

    await by_host(views, one)
    return results


def _host(addrs: Sequence[str]) -> str:
    """The IP of a peer's first direct address ("" when it has none: relayed only)."""
    from node.p2p.addrs import ip_of

    return next((ip for ip in map(ip_of, addrs) if ip), "")


def _late(view: PeerView) -> tuple[Measured, ...]:
    """What a peer whose challenge ran past `PEER_S` shows."""
    from scheduler.verification.challenge import Measured

    cal = view.profile.calibration
    claimed = cal.cpu_claim if cal is not None else 0.0
    why = f"challenge: not answered: no verdict within {PEER_S:g} s"
    return (Measured("CPU", claimed, 0.0, why, answered=False),)


def verdict(measured: Measured) -> str:
    """`borne out`, `refused` or `not answered`."""
    if not measured.answered:
        return "not answered"
    return "refused" if measured.problem else "borne out"


def as_json(measured: Sequence[Measured]) -> list[dict[str, Any]]:
    """A peer's challenged units as `peers --json` lists them."""
    return [
        {
            "unit": m.unit,
            "claimed_gflops": round(m.claimed_gflops, 3),
            "measured_gflops": round(m.measured_gflops, 3),
            "measured_is_bound": m.under,
            "verdict": verdict(m),
            "reason": m.problem,
        }
        for m in measured
    ]


def attach(rows: list[dict[str, Any]], results: dict[str, tuple[Measured, ...]] | None) -> None:
    """Each `peers --json` row given its peer's challenged units (`challenge`), when it was asked."""
    for row in rows if results is not None else []:
        row["challenge"] = as_json(results.get(row["peer_id"], ()) if results else ())


def print_table(results: dict[str, tuple[Measured, ...]] | None, whole_ids: bool) -> None:
    """The challenge's table (when it was asked): a row per peer and unit, measured against claimed,
    and the verdict."""
    if results is None:
        return
    from rich.table import Table

    from node.cli.console import console, id_tail
    from protocol import for_rich

    table = Table("peer id", "unit", "claimed", "measured", "verdict", title="challenge")
    table.columns[0].no_wrap = True
    for peer_id, measured in results.items():
        for m in measured:
            shown = verdict(m)
            colour = {"borne out": "green", "refused": "red"}.get(shown, "yellow")
            table.add_row(
                for_rich(peer_id if whole_ids else id_tail(peer_id)),
                for_rich(m.unit),
                _figure(m.claimed_gflops, m.unit),
                ("under " if m.under else "") + _figure(m.measured_gflops, m.unit)
                if m.measured_gflops
                else "-",
                f"[{colour}]{shown}[/{colour}]" + (f"\n{for_rich(m.problem)}" if m.problem else ""),
            )
    console().print(table)


def _figure(gflops: float, unit: str) -> str:
    """A CPU's figure in GFLOPS, a GPU's in TFLOPS."""
    return f"{gflops:.3g} GFLOPS" if unit == "CPU" else f"{gflops / 1e3:.3g} TFLOPS"


__all__ = ["CONCURRENCY", "PEER_S", "as_json", "attach", "challenge_peers", "print_table", "verdict"]
