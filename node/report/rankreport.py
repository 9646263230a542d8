"""The campaign's ranking of its fronts (`scheduler.results.frontrank`) in every medium: report.html,
Markdown and the terminal. One table: each swept length's devices or servers in rank order (the rank,
the score and the point that gave it, its verification tier and error share, the figures the bounds
read), the unranked last with why; the rule and the order's rule (verified before unchecked, failed
verification never ranked, ties shared) above it. Every peer- or campaign-written string passes its
medium's seam."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from protocol import for_html, for_markdown, for_rich
from scheduler.results import CampaignReport, Ranking, Standing

if TYPE_CHECKING:
    from rich.table import Table

TITLE: Final = "Ranking"
HEAD: Final = ("rank", "device · unit · target · lengths", "score", "load", "tier · verified", "error share",
               "figures read", "why not ranked")  # fmt: skip
NUMERIC: Final = frozenset({0, 2, 5})
_NUM: Final = ' class="num"'


def _cells(s: Standing) -> tuple[str, ...]:
    tier = " · ".join(x for x in (s.tier or "", s.verified) if x)
    read = "; ".join(f"{n.removesuffix('_ms').upper()} {v:.1f} ms" for n, v in s.bounded.items())
    share = "" if s.error_share is None else f"{s.error_share:.1%}"
    return (
        "" if s.rank is None else str(s.rank),
        s.name(),
        "" if s.score is None else f"{s.score:.4g}",
        s.load,
        tier,
        share,
        read,
        s.why,
    )


def _heading(ranking: Ranking) -> tuple[str, str]:
    return f"{TITLE}: {ranking.rule}", ranking.order


def _shown(ranking: Ranking) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The head and each standing's cells, "why not ranked" left out where every standing ranked."""
    rows = [_cells(s) for s in ranking.standings]
    if all(s.rank is not None for s in ranking.standings):
        return HEAD[:-1], [row[:-1] for row in rows]
    return HEAD, rows


def ranking_html(report: CampaignReport) -> list[str]:
    """report.html's section (none when the campaign asks no `rank:`)."""
    ranking = report.ranking
    if ranking is None:
        return []
    title, order = _heading(ranking)
    head, cells = _shown(ranking)
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    rows = []
    for s, row in zip(ranking.standings, cells, strict=True):
        tds = "".join(f"<td{_NUM if k in NUMERIC else ''}>{for_html(c)}</td>" for k, c in enumerate(row))
        rows.append(f'<tr data-rank="{"" if s.rank is None else s.rank}">{tds}</tr>')
    return [
        f"<h2>{for_html(title)}</h2>",
        f'<p class="muted">{for_html(order)}</p>',
        f'<table id="ranking"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>',
    ]


def ranking_markdown(report: CampaignReport) -> list[str]:
    """The same table for `report --format md`."""
    ranking = report.ranking
    if ranking is None:
        return []
    title, order = _heading(ranking)
    head, cells = _shown(ranking)
    md = for_markdown
    out = [f"## {md(title)}", "", f"_{md(order)}_", "", "| " + " | ".join(head) + " |"]
    out.append("|" + "|".join("---:" if k in NUMERIC else "---" for k in range(len(head))) + "|")
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in cells]
    return [*out, ""]


def ranking_table(report: CampaignReport) -> Table | None:
    """The terminal's table (None when the campaign asks no `rank:`)."""
    ranking = report.ranking
    if ranking is None:
        return None
    from rich.table import Table

    title, order = _heading(ranking)
    head, cells = _shown(ranking)
    table = Table(title=for_rich(title), caption=order, caption_justify="left")
    for k, name in enumerate(head):
        table.add_column(name, overflow="fold", justify="right" if k in NUMERIC else "left")
    for row in cells:
        table.add_row(*(for_rich(c) for c in row))
    return table


__all__ = ["ranking_html", "ranking_markdown", "ranking_table"]
