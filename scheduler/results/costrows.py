"""A row priced: its `Price` chosen at the one seam (`prices.price_of`) and its cost columns' cells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from protocol import Measurement
from scheduler.language import PriceRule
from scheduler.results.columns import cell
from scheduler.results.prices import Price, costs_of, price_of
from scheduler.results.typed import TaskResult
from scheduler.results.verifyrows import class_id
from scheduler.state.placement import PeerView


def priced(result: TaskResult, rules: Sequence[PriceRule], peer: PeerView | None) -> TaskResult:
    """A measured task with its price (a task without a result is not priced): the campaign's rule for
    its peer or class, else its owner's word from the advert it was placed by (`peer`, the scheduler's
    view) and from the result's signed device, bounded (`scheduler.results.prices`)."""
    if result.body is None:
        return result
    advertised = peer.profile.price_per_hour if peer is not None else None
    said = result.body.device.price_per_hour
    price = price_of(rules, result.task.peer_id or "", class_id(result.task, peer), advertised, said)
    return replace(result, price=price)


def cost_columns(m: Measurement | None, price: Price | None) -> dict[str, str]:
    """The cost columns of a row: its price and source, and its costs' cells."""
    costs = costs_of(m, price)
    return {
        "PricePerHour": cell("PricePerHour", price.per_hour if price is not None else None),
        "PriceSource": price.source if price is not None else "",
        "CostPer1kInferences": cell("CostPer1kInferences", costs.per_1k_inferences),
        "CostPerMTokens": cell("CostPerMTokens", costs.per_m_tokens),
        "InferencesPerJoule": cell("InferencesPerJoule", costs.inferences_per_joule),
        "TokensPerJoule": cell("TokensPerJoule", costs.tokens_per_joule),
    }
