"""The campaign's ranking of its fronts (`rank:`, `scheduler.language.ranking`): at each swept length,
each device or server placed by its best eligible point.

A point is eligible when it meets every bound the rank names (the figure at the rank's `at`: median,
p90 or p99), its error share is within `max_error_pct`, it has the figure scored (goodput needs the
job's `generate.slo`), and its verification did not fail (an outlier, a disagreed or an unverifiable
point never ranks). Its score: output tok/s (`by: throughput`) or requests/s that met the SLO
(`by: goodput`). Each device's or server's standing is its best point by (tier, score): tier
`verified` (replicated by a quorum) before `unchecked` (single, pending, or a job that asked no
verification), so an unchecked point never ranks above a verified one, whatever its score. Equal
tier and score share a rank (1, 1, 3). A device or server with no eligible point, or only failed
tasks, is listed unranked with why. Pure: read from the groups' points, so results.json gives it again.

The cheater's view: a worker chooses its timings, so its throughput and latencies are its word; the
figures ranked are those the submitter derived from its raw records, and the tier is the submitter's
replica-group verdict (the row's Verified), which no worker sets. A worker that inflates its figures
ranks at best first among the unchecked, below every verified device; only `verify:` lifts a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pydantic import Field

from protocol import Value
from scheduler.language import Rank
from scheduler.results.front import Front, FrontPoint

Tier = Literal["verified", "unchecked"]
ORDER: Final = (
    "verified points (replicated by a quorum) rank above unchecked ones (single, pending, no "
    "verification asked) whatever their scores; failed verification never ranks; equal scores share a rank"
)
_SHOWN: Final = 3  # the points an unranked standing names


class Standing(Value):
    """One device's or server's place at one swept length: its rank (None: not ranked, `why`), its
    score and the point that gave it."""

    target: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    rank: int | None = None
    score: float | None = None
    tier: Tier | None = None
    load: str = ""
    verified: str = ""
    error_share: float | None = None
    bounded: dict[str, float] = Field(default_factory=dict)
    why: str = ""

    def name(self) -> str:
        """The group as the fronts name it: the target, then the lengths swept."""
        return Front(
            target=self.target, input_tokens=self.input_tokens, output_tokens=self.output_tokens
        ).name()


class Ranking(Value):
    """The campaign's ranking: its rule in words, what the score is, the order's rule, and the
    standings, grouped by swept length in the order the lengths first appear, ranked ones first."""

    rule: str
    score: str
    order: str = ORDER
    standings: tuple[Standing, ...] = ()


def tier_of(verified: str) -> Tier | None:
    """A point's tier from its row's Verified: `replicated ...` is verified; single, pending and ""
    (no verification asked) unchecked; anything else (outlier, disagreed, unverifiable) None."""
    if verified.startswith("replicated"):
        return "verified"
    return "unchecked" if verified in ("", "single", "pending") else None


def ranking_of(rank: Rank | None, groups: Sequence[Front]) -> Ranking | None:
    """The standings of every group (`front.groups_of`) by the campaign's rank (None: none asked)."""
    if rank is None:
        return None
    score = "output tok/s" if rank.by == "throughput" else "requests/s within the SLO"
    lengths: dict[tuple[int | None, int | None], list[Standing]] = {}
    for group in groups:
        lengths.setdefault((group.input_tokens, group.output_tokens), []).append(_standing(rank, group))
    standings = [s for at_length in lengths.values() for s in _placed(at_length)]
    return Ranking(rule=rank.says(), score=score, standings=tuple(standings))


def _standing(rank: Rank, group: Front) -> Standing:
    base = Standing(target=group.target, input_tokens=group.input_tokens, output_tokens=group.output_tokens)
    scored: list[tuple[int, float, FrontPoint]] = []
    refused: list[str] = []
    for point in group.points:
        value, why = _score(rank, point)
        tier = tier_of(point.verified)
        if value is not None and tier is not None:
            scored.append((0 if tier == "verified" else 1, value, point))
        else:
            refused.append(f"{point.load}: {why or f'verification failed ({point.verified})'}")
    if not scored:
        failed = [f"{group.failed} task(s) failed"] if group.failed else []
        said = "; ".join([*failed, *refused[:_SHOWN]]) + ("; ..." if len(refused) > _SHOWN else "")
        return base.with_(why=f"no eligible point: {said}" if said else "no point")
    level, value, best = min(scored, key=lambda s: (s[0], -s[1], s[2].latency_ms))
    return base.with_(
        score=value,
        tier="verified" if level == 0 else "unchecked",
        load=best.load,
        verified=best.verified,
        error_share=best.error_share,
        bounded=dict(best.bounded),
    )


def _score(rank: Rank, p: FrontPoint) -> tuple[float | None, str]:
    """The point's score, or None and why it is not eligible."""
    if rank.max_error_pct is not None and (p.error_share or 0.0) * 100 > rank.max_error_pct:
        return None, f"error share {(p.error_share or 0.0):.1%} over {rank.max_error_pct:g} %"
    for name, bound in rank.bounds().items():
        figure = p.bounded.get(name)
        label = f"{name.removesuffix('_ms').upper()} {rank.at}"
        if figure is None:
            return None, f"{label} not measured"
        if figure > bound:
            return None, f"{label} {figure:.1f} ms over {bound:g} ms"
    if rank.by == "goodput":
        if p.goodput_per_s is None:
            return None, "no goodput (the job set no generate.slo)"
        return p.goodput_per_s, ""
    return p.throughput, ""


def _placed(standings: list[Standing]) -> list[Standing]:
    """Competition ranks within one length: by tier, then score; ties share a rank; unranked last."""
    ranked = sorted(
        (s for s in standings if s.score is not None),
        key=lambda s: (s.tier != "verified", -(s.score or 0.0), s.target),
    )

    def place(s: Standing) -> tuple[bool, float]:
        return s.tier != "verified", -(s.score or 0.0)

    out = [s.with_(rank=1 + sum(1 for o in ranked if place(o) < place(s))) for s in ranked]
    return out + [s for s in standings if s.score is None]


__all__ = ["ORDER", "Ranking", "Standing", "ranking_of", "tier_of"]
