"""A campaign's or a job's `verify:` block: how its timings are checked against other peers'.

    verify:
      replicas: 2          # each task on this many peers of one device class (1: not replicated)
      spot_check: 0.1      # instead: replicate a task with this probability (1 for untrusted peers)
      unverified: refuse   # place peers whose device claims are not believed? allow | refuse
      same_host: refuse    # allow: replicas may share a network host (a lab on one machine only)
      reference: [12D3KooW...]  # the submitter's own devices: one joins every quorum of its class
                                # (an owner id, owner-..., names every device of that owner)
      reference_fallback: refuse  # allow: a class whose named reference is missing (offline, not
                                  # found, relayed, its task failed) is settled by the majority

A job's block replaces the campaign's. A reference device is one the submitter trusts (its own): a
replicated task of its class (full replication or a spot check) has it in its quorum, and a replica
that disagrees with it is the outlier whatever the others say (`verification.references`).
`same_host: allow` gives up the guarantee that one owner with many keys on one machine cannot make a
quorum; it exists for a lab whose workers all run on one host, and every row it verifies says so
(`Verified` ends with "(same host)").

A named reference that is missing is never replaced in silence: a class it could belong to (its
own, or, for one the submitter never found, every class with no reference of its own present) is
`Unverifiable`, naming the reference, why it is missing and `reference_fallback: allow`, the field
that lets the majority settle it (`scheduler.state.replication.reference_gap`, `settling.verdict`).
The cheater's view: a Sybil pair that wants its lie to stand needs the reference gone, and it can
make it go (flood it, hold its challenge, make its task fail); what it cannot make is the submitter
settle the class without it, unless the campaign said so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from protocol import Value
from scheduler.language.problems import Problems, check_keys, describe

MAX_REPLICAS: Final = 10
_FIELDS: Final = ("replicas", "spot_check", "unverified", "same_host", "reference", "reference_fallback")
MAX_REFERENCES: Final = 64
_PEER_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")  # libp2p writes base58btc; no space, no control


class Verify(Value):
    """How a job's results are verified (the default: not at all, unverified claims refused).

    Attributes:
        replicas: peers of one class that run each task (1: a single result).
        spot_check: the probability of replicating a task of a trusted peer (0: never).
        unverified: whether a peer marked `claim_unverified` may be placed.
        same_host: whether replicas may share a network host.
        reference: the peer ids of the submitter's own devices (or owner ids: every device whose
            verified owner it is): one of its class joins each quorum, and its figure is the one the
            others are judged against.
        reference_fallback: whether a class whose named reference is missing (not found, relayed,
            refused, or its task ended without a result) may be settled by the majority; by
            default it is `Unverifiable`, with why.
    """

    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    spot_check: float = Field(default=0.0, ge=0.0, le=1.0)
    unverified: Literal["refuse", "allow"] = "refuse"
    same_host: Literal["refuse", "allow"] = "refuse"
    reference: tuple[str, ...] = ()
    reference_fallback: Literal["refuse", "allow"] = "refuse"

    @model_serializer(mode="wrap")
    def _without_empty_reference(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """No `reference` key when none is named, no `reference_fallback` at its default: campaigns
        written before them read the same."""
        data: dict[str, object] = handler(self)
        if not self.reference:
            data.pop("reference", None)
        if self.reference_fallback == "refuse":
            data.pop("reference_fallback", None)
        return data

    @property
    def strict_reference(self) -> bool:
        """Whether a missing named reference makes its class `Unverifiable` (no fallback allowed)."""
        return bool(self.reference) and self.reference_fallback != "allow"

    @property
    def replicated(self) -> bool:
        """Whether tasks are grouped into replicas at all (full replication or spot checks)."""
        return self.replicas > 1 or self.spot_check > 0


NOT_VERIFIED: Final = Verify()
"""The default: single results, unverified claims refused."""


def parse_verify(raw: object, path: str, problems: Problems) -> Verify | None:
    """The block at `path`, or None with every problem recorded (each naming its field)."""
    if not isinstance(raw, dict):
        problems.add(path, f"expected a mapping ({', '.join(_FIELDS)}), got {describe(raw)}")
        return None
    before = len(problems.items)
    check_keys(raw, path, _FIELDS, problems)
    values: dict[str, object] = {}
    replicas = raw.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        problems.add(
            f"{path}.replicas", f"expected a whole number from 1 to {MAX_REPLICAS}, got {describe(replicas)}"
        )
    else:
        values["replicas"] = replicas
    spot = raw.get("spot_check", 0.0)
    if isinstance(spot, bool) or not isinstance(spot, int | float) or not 0 <= spot <= 1:
        problems.add(f"{path}.spot_check", f"expected a probability from 0 to 1, got {describe(spot)}")
    else:
        values["spot_check"] = float(spot)
    for field in ("unverified", "same_host", "reference_fallback"):
        value = raw.get(field, "refuse")
        if value not in ("refuse", "allow"):
            problems.add(f"{path}.{field}", f"expected allow or refuse, got {describe(value)}")
        else:
            values[field] = value
    if values.get("spot_check", 0.0) and values.get("replicas", 1) != 1:
        problems.add(f"{path}.spot_check", "give replicas: N (every task) or spot_check: p (some), not both")
    if "reference" in raw:
        references = _references(raw["reference"], f"{path}.reference", problems)
        if references and values.get("replicas", 1) == 1 and not values.get("spot_check", 0.0):
            problems.add(
                f"{path}.reference", "a reference joins replicated tasks: give replicas: N or spot_check: p"
            )
        values["reference"] = references
    elif "reference_fallback" in raw:
        problems.add(
            f"{path}.reference_fallback", "a fallback is for a named reference: give reference: [...]"
        )
    return Verify.model_validate(values) if len(problems.items) == before else None


def _references(raw: object, path: str, problems: Problems) -> tuple[str, ...]:
    """The reference peer ids at `path`, each bad entry recorded with its index."""
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_REFERENCES:
        problems.add(path, f"expected a list of 1 to {MAX_REFERENCES} peer ids, got {describe(raw)}")
        return ()
    kept: list[str] = []
    for k, item in enumerate(items):
        if not isinstance(item, str) or not _PEER_ID.fullmatch(item):
            problems.add(
                f"{path}[{k}]",
                f"expected a peer id (12D3KooW...) or an owner id (owner-...), got {describe(item)}",
            )
        elif item in kept:
            problems.add(f"{path}[{k}]", f"{item} is listed twice")
        else:
            kept.append(item)
    return tuple(kept)


def verify_of(campaign_verify: Verify, job_verify: Verify | None) -> Verify:
    """The block that applies to a job: its own, else the campaign's."""
    return job_verify if job_verify is not None else campaign_verify


def verify_field(data: Mapping[str, object], path: str, problems: Problems) -> Verify | None:
    """A `verify:` key of a mapping parsed, or None when absent (or wrong: recorded)."""
    return parse_verify(data["verify"], path, problems) if "verify" in data else None


def black_box_verify(campaign: Verify, own: Verify | None, path: str, problems: Problems) -> None:
    """A black-box job's `verify:` asks no replicas: its URL is one server every worker reaches, so
    replicas would measure the same server from two places, not check each other (its records are held
    to the submitter's own probe of the server and, with `metrics_url`, the server's count). Refused
    here, before anything runs, rather than ending each of its tasks `Unverifiable` after it ran."""
    if not verify_of(campaign, own).replicated:
        return
    why = (
        "is one server every worker reaches: it cannot be replicated or spot-checked (its records are "
        "held to the submitter's own probe of it and, with metrics_url, to the server's count)"
    )
    if own is not None:
        problems.add(f"{path}.verify", f"a black-box endpoint (url:) {why}; give it verify: {{replicas: 1}}")
    else:
        problems.add(
            "verify",
            f"applies to {path}, whose black-box endpoint (url:) {why}; give {path} "
            "its own verify: {replicas: 1}",
        )
