"""A campaign's `prices:` block: what an hour of a device costs, per peer or per device class.

    prices:
      - peer: 12D3KooW...      # one worker, by its peer id
        per_hour: 0.42
      - class: cls-1a2b3c4d...  # every device of a class, by its whole id (cls- and 64 hex digits:
        per_hour: 1.10          # `DeviceClass.id`, `plan --json`'s class_ids, `peers --json`'s class_id)

The campaign's word wins over what a worker's owner advertises (`sark-node join --price-per-hour`); a
peer's own rule wins over its class's. Prices are in the campaign's currency (the report says "$").
`scheduler.results.prices` applies the rules to each row and says which one it took.

A class is named whole in a rule: the short name (`cls-` and 8 hex digits, results.csv's DeviceClass)
is for display. The cheater's view: a worker chooses its whole profile, so 32 bits of a name are about
2^32 hashes from another class's (its price taken); the whole id is 256 bits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

from pydantic import Field

from protocol import MAX_PRICE_PER_HOUR, Value
from scheduler.language.problems import Problems, check_keys, describe

MAX_PRICE_RULES: Final = 1_000
_FIELDS: Final = ("peer", "class", "per_hour")
_CLASS_ID: Final = re.compile(r"cls-[0-9a-f]{64}")
_CLASS_NAME: Final = re.compile(r"cls-[0-9a-f]{8}")
_PEER_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")  # libp2p writes base58btc; no space, no control


class PriceRule(Value):
    """One price of the campaign: a peer's (`peer`) or a device class's (`device_class`), per hour."""

    peer: str = ""
    device_class: str = ""
    per_hour: float = Field(ge=0.0, le=MAX_PRICE_PER_HOUR)

    @property
    def target(self) -> str:
        """What it prices, for people: "peer 12D3…" or "class cls-…" (the class's whole id)."""
        return f"peer {self.peer}" if self.peer else f"class {self.device_class}"


def parse_prices(data: Mapping[str, object], problems: Problems) -> tuple[PriceRule, ...]:
    """The campaign's `prices:` list (empty when absent), every problem recorded at its path."""
    raw = data.get("prices", [])
    if not isinstance(raw, list) or len(raw) > MAX_PRICE_RULES:
        problems.add("prices", f"expected a list of at most {MAX_PRICE_RULES} prices, got {describe(raw)}")
        return ()
    rules = [_rule(entry, f"prices[{i}]", problems) for i, entry in enumerate(raw)]
    found = tuple(r for r in rules if r is not None)
    targets = [r.target for r in found]
    for target in sorted({t for t in targets if targets.count(t) > 1}):
        problems.add("prices", f"{target} is priced more than once")
    return found


def _rule(entry: object, path: str, problems: Problems) -> PriceRule | None:
    if not isinstance(entry, dict):
        problems.add(path, f"expected a mapping with peer or class and per_hour, got {describe(entry)}")
        return None
    before = len(problems.items)
    check_keys(entry, path, _FIELDS, problems)
    peer, cls, price = entry.get("peer", ""), entry.get("class", ""), entry.get("per_hour")
    if bool(peer) == bool(cls):
        problems.add(path, "give one of peer: (a peer id) or class: (a device class name)")
    if peer and (not isinstance(peer, str) or not _PEER_ID.fullmatch(peer)):
        problems.add(f"{path}.peer", f"expected a peer id (12D3KooW...), got {describe(peer)}")
    if cls and isinstance(cls, str) and _CLASS_NAME.fullmatch(cls):
        problems.add(
            f"{path}.class",
            f"{cls} is a class's short name, for display: a rule names a class whole (cls- and 64 hex "
            "digits: plan --json's class_ids, peers --json's class_id), or a profile ground to share "
            "its 32 bits would take this price",
        )
    elif cls and (not isinstance(cls, str) or not _CLASS_ID.fullmatch(cls)):
        problems.add(
            f"{path}.class", f"expected a device class id (cls- and 64 hex digits), got {describe(cls)}"
        )
    if not _is_price(price):
        problems.add(
            f"{path}.per_hour",
            f"expected a price from 0 to {MAX_PRICE_PER_HOUR:g} per hour, got {describe(price)}",
        )
    if len(problems.items) > before:
        return None
    assert isinstance(price, int | float)
    return PriceRule(peer=str(peer), device_class=str(cls), per_hour=float(price))


def _is_price(value: object) -> bool:
    """A finite number from 0 to `MAX_PRICE_PER_HOUR` (a flag is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and 0 <= value <= MAX_PRICE_PER_HOUR
