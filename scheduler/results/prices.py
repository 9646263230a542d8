"""A row's price and what its results cost: the one seam where a price is chosen and bounded.

A price per hour comes from the campaign (`prices:`, a peer's rule before its class's) or, without
one, from the worker's owner (`join --price-per-hour`, carried in its profile). The owner's word is a
peer's word: read from the advert the submitter placed the task by and from the result's own device,
it is refused unless it is a finite number from 0 to `MAX_PRICE_PER_HOUR`, and where the two differ the
higher one is taken (a worker cannot look cheaper by changing its price after it was placed). Every
renderer shows the `Price` this module gives, with its source, and nothing else.

The figures (`Costs`), each empty where it does not apply:

    cost per 1,000 inferences  = price per hour x median inference ms / 3,600   (a tensor task)
    cost per M output tokens   = price per hour / 3,600 / output tok/s x 10^6  (a generate task)
    inferences per joule       = 1 / net joules per inference                   (energy was measured)
    tokens per joule           = 1 / net joules per output token
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol import MAX_PRICE_PER_HOUR, Measurement, Value
from scheduler.language import PriceRule


class Price(Value):
    """The price a row's results are costed at, and where it came from.

    Attributes:
        per_hour: the price of an hour of the device (None: refused, see `source`).
        source: "campaign: peer", "campaign: class cls-…", "owner", "owner: the higher of …", or
            "owner: refused: …" naming the value and the bound.
    """

    per_hour: float | None = None
    source: str = ""


class Costs(Value):
    """What a row's results cost, in money and in energy (None: does not apply or was not measured)."""

    per_1k_inferences: float | None = None
    per_m_tokens: float | None = None
    inferences_per_joule: float | None = None
    tokens_per_joule: float | None = None


def price_of(
    rules: Sequence[PriceRule], peer_id: str, device_class: str, advertised: float | None, said: float | None
) -> Price | None:
    """The price of one row: the campaign's rule for its peer, else for its class, else the owner's.

    Args:
        rules: the campaign's `prices:`.
        peer_id: the worker's peer id ("" none).
        device_class: the row's device class id, whole (`DeviceClass.id`; "" none).
        advertised: the owner's price in the advert the task was placed by (None: none or unknown).
        said: the owner's price in the result's signed device (None: none, or no result).

    Returns:
        The price with its source, or None when nobody named one.
    """
    for rule in rules:
        if peer_id and rule.peer == peer_id:
            return Price(per_hour=rule.per_hour, source="campaign: peer")
    for rule in rules:
        if device_class and rule.device_class == device_class:  # whole: 256 bits, not the name's 32
            return Price(per_hour=rule.per_hour, source=f"campaign: class {device_class[:12]}")
    return _owners(advertised, said)


def _owners(advertised: float | None, said: float | None) -> Price | None:
    """The owner's price, bounded: refused outside 0..`MAX_PRICE_PER_HOUR`, the higher of two words."""
    words = [
        (what, v) for what, v in (("advertised", advertised), ("result's device", said)) if v is not None
    ]
    if not words:
        return None
    for what, value in words:
        if not (math.isfinite(value) and 0 <= value <= MAX_PRICE_PER_HOUR):
            bound = f"0..{MAX_PRICE_PER_HOUR:g} per hour"
            return Price(source=f"owner: refused: {what} price {value!r} is outside {bound}")
    values = [v for _, v in words]
    if len(set(values)) > 1:
        shown = ", ".join(f"{what} {v:g}" for what, v in words)
        return Price(per_hour=max(values), source=f"owner: the higher of {shown}")
    return Price(per_hour=values[0], source="owner")


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def costs_of(m: Measurement | None, price: Price | None) -> Costs:
    """A row's costs from its derived measurement and its price (module docstring: the formulas)."""
    if m is None:
        return Costs()
    hourly = price.per_hour if price is not None else None
    g, energy = m.generation, m.energy
    per_1k = per_m = None
    if hourly is not None and g is None and m.inference_ms.n and math.isfinite(m.inference_ms.median):
        per_1k = hourly * m.inference_ms.median / 3600.0
    if hourly is not None and g is not None and g.requests > g.errors and _positive(g.output_tok_per_s):
        per_m = hourly / 3600.0 / g.output_tok_per_s * 1e6
    j_inf = energy.joules_per_inference if energy is not None else None
    j_tok = energy.joules_per_token if energy is not None else None
    return Costs(
        per_1k_inferences=per_1k,
        per_m_tokens=per_m,
        inferences_per_joule=1.0 / j_inf if j_inf is not None and _positive(j_inf) else None,
        tokens_per_joule=1.0 / j_tok if j_tok is not None and _positive(j_tok) else None,
    )
