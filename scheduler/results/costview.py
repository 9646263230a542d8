"""Performance per dollar and per watt as every view shows it: the figures, their labels, a ranking.

`COST_FIGURES` name the four figures of `prices.Costs` under one label each, with the formula the
label stands for and which way is better; `cost_lines` gives one line per priced or metered task,
ranked by one of them (the best first, tasks without that figure after, in task order). report.html,
`report --format md`, the terminal, the LLM view and `report --diff` show these lines and labels.
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scheduler.results.prices import Costs, Price
from scheduler.results.report import ReportEntry, device_label


@dataclass(frozen=True)
class CostFigure:
    """One cost figure: its key (a `Costs` field), its label, its formula, and which way is better."""

    key: str
    label: str
    formula: str
    higher_is_better: bool = False

    def of(self, costs: Costs) -> float | None:
        """This figure of a task's costs."""
        value: float | None = getattr(costs, self.key)
        return value


COST_FIGURES: Final = (
    CostFigure("per_1k_inferences", "$ / 1k inferences", "price per hour x median inference ms / 3600"),
    CostFigure("per_m_tokens", "$ / M output tokens", "price per hour / 3600 / output tok/s x 10^6"),
    CostFigure("inferences_per_joule", "inferences / J", "1 / net J per inference", higher_is_better=True),
    CostFigure("tokens_per_joule", "tokens / J", "1 / net J per output token", higher_is_better=True),
)
"""The figures of performance per dollar and per watt, in the order every view shows them."""

RANKS: Final = {f.key: f for f in COST_FIGURES}
"""The figures a view can rank by, by key (`report --rank KEY`)."""


@dataclass(frozen=True)
class CostLine:
    """One task's line: what ran where, its price and source, and its cost figures."""

    device: str
    unit: str
    model: str
    task_id: str
    price: Price | None
    costs: Costs


def cost_lines(entries: Sequence[ReportEntry], rank: str = "") -> tuple[CostLine, ...]:
    """One line per task with a price or a cost figure (a flagged replica's left out, as the matrix
    leaves its figure out), ranked by `rank` (a `RANKS` key; "" keeps task order): the best first,
    then the lines without that figure.

    Raises:
        KeyError: `rank` names no figure.
    """
    shown = [e for e in entries if e.complete and (e.price is not None or _any(e.costs))]
    lines = [CostLine(device_label(e, entries), e.unit, e.model, e.task_id, e.price, e.costs) for e in shown]
    if not rank:
        return tuple(lines)
    figure = RANKS[rank]

    def key(line: CostLine) -> tuple[bool, float]:
        value = figure.of(line.costs)
        if value is None:
            return (True, 0.0)
        return (False, -value if figure.higher_is_better else value)

    return tuple(sorted(lines, key=key))  # stable: ties keep task order


def _any(costs: Costs) -> bool:
    return any(f.of(costs) is not None for f in COST_FIGURES)


def figures_of(lines: Sequence[CostLine]) -> tuple[CostFigure, ...]:
    """The figures at least one line has (a table shows no empty column)."""
    return tuple(f for f in COST_FIGURES if any(f.of(line.costs) is not None for line in lines))


def price_text(price: Price | None) -> str:
    """A price as every view writes it: "0.5 $/h (owner)", "refused (owner: refused: …)", or "" none."""
    if price is None:
        return ""
    if price.per_hour is None:
        return f"none ({price.source})"
    return f"{price.per_hour:.4g} $/h ({price.source})"
