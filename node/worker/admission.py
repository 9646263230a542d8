"""Admission: whether this worker takes an offer it has authenticated, and if not, the reason.

Pure: a function of the offer, this device's profile, the owner's policy and the worker's load now.
No I/O, no clock; the negotiator gathers the load (queue room, cache, relay) and sends the answer.
The checks mirror placement's (`scheduler.state.placement`), which the submitter ran on the advert: here
they run again on the worker's own, current facts. The unit check is the same function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from protocol import DeclineReason, DeviceProfile, ModelFormat, OfferBody
from scheduler import endpoint_problem, unit_problem

CODE_FORMATS: Final = frozenset({ModelFormat.TORCH_EXPORT, ModelFormat.TORCHSCRIPT})
"""Model formats that run code when loaded: taken only when the owner opted in."""


@dataclass(frozen=True)
class OfferPolicy:
    """Which submitters a worker takes offers from, and what it will take on.

    An offer valid for longer than `max_offer_lifetime_s` is declined `lifetime` before its nonce is
    remembered; each submitter may hold `nonce_share` of the `nonce_capacity` remembered nonces. A
    commit whose dispatch has not come within `dispatch_s` gives its place back (an honest submitter
    dispatches as it reads the commit); an outcome not acknowledged within `ack_s` ends its stream (the
    outbox keeps a result for a reclaim): neither a place nor a stream is a stranger's to hold.
    """

    allow: frozenset[str] = frozenset()
    open_mode: bool = False
    max_model_bytes: int = 2 << 30
    allow_code_models: bool = False
    lease_ttl_s: float = 10.0
    heartbeat_s: float = 2.0
    first_message_s: float = 10.0
    dispatch_s: float = 10.0
    ack_s: float = 300.0
    max_offer_lifetime_s: float = 600.0
    nonce_capacity: int = 100_000
    nonce_share: int = 10_000


@dataclass(frozen=True)
class WorkerLoad:
    """What admission needs to know about the worker now.

    Attributes:
        has_room: the queue of committed tasks has a free place.
        has_model: the model is already in this worker's cache.
        submitter_relayed: our connection to the submitter runs through a relay.
        leaving: the worker is leaving the swarm (SIGTERM): it takes nothing more.
    """

    has_room: bool
    has_model: bool = False
    submitter_relayed: bool = False
    leaving: bool = False


@dataclass(frozen=True)
class Refusal:
    """Why an offer is declined: a code from the closed set, and a detail for people."""

    reason: DeclineReason
    detail: str


@dataclass(frozen=True)
class _Facts:
    offer: OfferBody
    profile: DeviceProfile
    policy: OfferPolicy
    load: WorkerLoad


def _leaving(f: _Facts) -> Refusal | None:
    if not f.load.leaving:
        return None
    return Refusal(DeclineReason.SHUTTING_DOWN, "this worker is leaving the swarm")


def _unit(f: _Facts) -> Refusal | None:
    generate = f.offer.spec.generate
    if generate is not None and generate.endpoint is not None:
        problem = endpoint_problem(generate.endpoint, f.profile)
        return None if problem is None else Refusal(DeclineReason.NO_ENDPOINT, problem)
    problem = unit_problem(f.offer.spec.compute_unit, f.profile)
    return None if problem is None else Refusal(DeclineReason.UNSUPPORTED_UNIT, problem)


def _format(f: _Facts) -> Refusal | None:
    kind = f.offer.model.format
    if kind not in CODE_FORMATS or f.policy.allow_code_models:
        return None
    detail = f"{kind.value} models run code when loaded; this worker's owner has not opted in"
    return Refusal(DeclineReason.FORMAT_NOT_ALLOWED, detail)


def _size(f: _Facts) -> Refusal | None:
    size, most = f.offer.model.size, f.policy.max_model_bytes
    if size <= most:
        return None
    return Refusal(DeclineReason.MODEL_TOO_LARGE, f"model is {size} bytes, this worker takes at most {most}")


def _memory(f: _Facts) -> Refusal | None:
    need = f.offer.spec.memory_limit_mb
    if need is None or need <= f.profile.ram_mb:
        return None
    return Refusal(DeclineReason.NOT_ENOUGH_MEMORY, f"needs {need} MB, device has {f.profile.ram_mb}")


def _queue(f: _Facts) -> Refusal | None:
    if f.load.has_room:
        return None
    return Refusal(DeclineReason.QUEUE_FULL, "the queue of committed tasks is full")


def _relay(f: _Facts) -> Refusal | None:
    generate = f.offer.spec.generate
    moves_bytes = generate is None or generate.endpoint is None
    needs_transfer = moves_bytes and not f.offer.model.sources and not f.load.has_model
    if not (needs_transfer and f.load.submitter_relayed):
        return None
    detail = "model bytes never cross a relay: give the model a URL or connect directly"
    return Refusal(DeclineReason.RELAYED, detail)


Check = Callable[[_Facts], Refusal | None]
CHECKS: Final[tuple[Check, ...]] = (_leaving, _unit, _format, _size, _memory, _queue, _relay)
"""In order: the first that objects is the answer (a worker declines with one reason)."""


def admit(offer: OfferBody, profile: DeviceProfile, policy: OfferPolicy, load: WorkerLoad) -> Refusal | None:
    """None if this worker takes the offer; else the first reason it does not."""
    facts = _Facts(offer, profile, policy, load)
    for check in CHECKS:
        refusal = check(facts)
        if refusal is not None:
            return refusal
    return None


__all__ = ["CHECKS", "CODE_FORMATS", "OfferPolicy", "Refusal", "WorkerLoad", "admit"]
