"""A campaign's or a job's `verify:` block: how its timings are checked against other peers'.

    verify:
      replicas: 2          # each task on this many peers of one device class (1: not replicated)
      spot_check: 0.1      # instead: replicate a task with this probability (1 for untrusted peers)
      unverified: refuse   # place peers whose device claims are not believed? allow | refuse
      same_host: refuse    # allow: replicas may share a network host (a lab on one machine only)

A job's block replaces the campaign's. `same_host: allow` gives up the guarantee that one owner with
many keys on one machine cannot make a quorum; it exists for a lab whose workers all run on one host,
and every row it verifies says so (`Verified` ends with "(same host)").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from pydantic import Field

from protocol import Value
from scheduler.language.problems import Problems, check_keys, describe

MAX_REPLICAS: Final = 10
_FIELDS: Final = ("replicas", "spot_check", "unverified", "same_host")


class Verify(Value):
    """How a job's results are verified (the default: not at all, unverified claims refused).

    Attributes:
        replicas: peers of one class that run each task (1: a single result).
        spot_check: the probability of replicating a task of a trusted peer (0: never).
        unverified: whether a peer marked `claim_unverified` may be placed.
        same_host: whether replicas may share a network host.
    """

    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    spot_check: float = Field(default=0.0, ge=0.0, le=1.0)
    unverified: Literal["refuse", "allow"] = "refuse"
    same_host: Literal["refuse", "allow"] = "refuse"

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
    for field in ("unverified", "same_host"):
        value = raw.get(field, "refuse")
        if value not in ("refuse", "allow"):
            problems.add(f"{path}.{field}", f"expected allow or refuse, got {describe(value)}")
        else:
            values[field] = value
    if values.get("spot_check", 0.0) and values.get("replicas", 1) != 1:
        problems.add(f"{path}.spot_check", "give replicas: N (every task) or spot_check: p (some), not both")
    return Verify.model_validate(values) if len(problems.items) == before else None


def verify_of(campaign_verify: Verify, job_verify: Verify | None) -> Verify:
    """The block that applies to a job: its own, else the campaign's."""
    return job_verify if job_verify is not None else campaign_verify


def verify_field(data: Mapping[str, object], path: str, problems: Problems) -> Verify | None:
    """A `verify:` key of a mapping parsed, or None when absent (or wrong: recorded)."""
    return parse_verify(data["verify"], path, problems) if "verify" in data else None
