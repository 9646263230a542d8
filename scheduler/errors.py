"""Errors of the scheduler package: a campaign file that cannot run, or a caller that broke the contract."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with a campaign file, at one field.

    Attributes:
        path: where, as the user wrote it: ``jobs[1].compute_unit``, ``model.sha256``; "" for the whole file.
        problem: what is wrong, in words a user can act on.
    """

    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path or '(file)'}: {self.problem}"


class SchedulerError(Exception):
    """Base of every error raised by `scheduler`.

    Attributes:
        detail: what went wrong, for people and logs; never branched on.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CampaignError(SchedulerError):
    """The campaign file is malformed: every problem found in one pass, each naming its field.

    Attributes:
        source: the file (or "request body") the text came from.
        problems: every problem, in the order the fields appear.
    """

    def __init__(self, problems: Iterable[FieldProblem], *, source: str = "campaign.yaml") -> None:
        self.source = source
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = [f"{source}: {count} problem{'s' if count != 1 else ''}"]
        lines.extend(f"  {p}" for p in self.problems)
        super().__init__("\n".join(lines))


class UnresolvedModelError(SchedulerError):
    """The caller gave no pinned `ModelRef` for a campaign model, or one whose digest contradicts the file.

    Attributes:
        missing: model keys with no `ModelRef`.
        mismatched: model keys whose `ModelRef.sha256` differs from the sha256 the campaign pins.
    """

    def __init__(self, missing: Iterable[str] = (), mismatched: Iterable[str] = ()) -> None:
        self.missing = tuple(missing)
        self.mismatched = tuple(mismatched)
        parts = []
        if self.missing:
            parts.append(f"no pinned model for {', '.join(self.missing)}")
        if self.mismatched:
            parts.append(f"sha256 differs from the campaign file for {', '.join(self.mismatched)}")
        super().__init__("; ".join(parts) or "unresolved models")
