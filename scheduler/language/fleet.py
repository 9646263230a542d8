"""A job's `fleet:` field: how many workers drive one model server together, checked against the job.

The schedule those workers share, their clocks and their figures are the state machine's
(`scheduler.state.fleet`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from protocol import GenerateSpec
from protocol.fleet import MAX_DEALT, MAX_FLEET
from scheduler.language.problems import Problems, check_keys, describe, number

Devices = Literal["all", "any"] | int


def is_fleet(spec: GenerateSpec | None) -> bool:
    """Whether a job's generate spec asks for fleet load."""
    return spec is not None and spec.fleet_size is not None


def parse_fleet(raw: object, where: str, problems: Problems) -> dict[str, int] | None:
    """A job's ``fleet:`` (``N``, ``all``, or ``{workers: N | all, seed: S}``) as the spec's
    `fleet_size` (0 for all) and, when given, `fleet_seed`; None with the problem recorded."""
    seed = None
    if isinstance(raw, dict):
        check_keys(raw, where, ("workers", "seed"), problems)
        seed = raw.get("seed")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63
        ):
            problems.add(f"{where}.seed", f"expected a whole number from 0 below 2**63, got {describe(seed)}")
            return None
        where, raw = f"{where}.workers", raw.get("workers")
    if raw == "all":
        size = 0
    elif isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_FLEET:
        problems.add(where, f"expected a number of workers from 1 to {MAX_FLEET} or all, got {describe(raw)}")
        return None
    else:
        size = raw
    return {"fleet_size": size} | ({} if seed is None else {"fleet_seed": seed})


def fleet_field(fields: Mapping[str, object], path: str, problems: Problems) -> dict[str, int] | None:
    """A job's ``fleet:`` checked against the rest of the job: an endpoint job with a duration, no
    ``devices:`` beside it. The spec's fleet fields, or None (none asked, or a problem recorded)."""
    if "fleet" not in fields:
        return None
    size = parse_fleet(fields["fleet"], f"{path}.fleet", problems)
    block = fields.get("generate")
    load = block if isinstance(block, dict) else {}
    if "endpoint" not in fields:
        problems.add(f"{path}.fleet", "fleet load drives a model server: it needs an endpoint: block")
    elif "devices" in fields:
        problems.add(
            f"{path}.devices", "a fleet job picks its own workers: give fleet: or devices:, not both"
        )
    elif "duration_s" not in load:
        problems.add(f"{path}.generate.duration_s", "fleet load runs for a set time: give duration_s")
    elif size is not None and (asked := _asked(load, size["fleet_size"])) is not None:
        problems.add(f"{path}.generate.request_rate", asked)
    else:
        return size
    return None


def _asked(load: Mapping[str, object], size: int) -> str | None:
    """Why a rate x duration asks more of each member than one result keeps, or None. `fleet: all`
    (size 0) is checked with the most members a fleet may have (`MAX_FLEET`): how many will take
    part is known only at placement, and no fleet can carry more than that."""
    rates, duration = load.get("request_rate"), number(load.get("duration_s"))
    numbers = (number(r) for r in (rates if isinstance(rates, list) else [rates]))
    top = max((r for r in numbers if r is not None), default=0.0)
    members = size or MAX_FLEET
    if duration is None or top * duration <= 0.9 * MAX_DEALT * members:
        return None
    over = f"over {MAX_DEALT} a member" if size else f"over {MAX_DEALT} a member for all {MAX_FLEET} members"
    return f"{top:g} req/s for {duration:g} s is about {top * duration:g} requests, {over}"


def fleet_devices(spec: GenerateSpec | None, devices: Devices) -> Devices:
    """The devices a fleet job's placement asks for: its member count, or every feasible peer."""
    if spec is None or spec.fleet_size is None:
        return devices
    return spec.fleet_size or "all"
