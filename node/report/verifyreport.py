"""Verification in every medium: one agreed figure per class, with its band, its replicas and the
outlier, in report.html's section, the Markdown report and the terminal's table after the matrix;
two campaigns' agreed figures side by side for `report --diff` (`agreed_table`).

One line per replica group (`scheduler.results.GroupVerification`, carried by the report): its
class, job, outcome, the agreed figure (none unless replicated), the band it was judged with, each
replica's peer (its id's end), figure, network and verdict, the outliers, and why. A campaign that
asked no verification gets one muted line saying its figures are each one peer's word. Presentation
only; every string a peer or a campaign wrote passes its medium's seam (the reason holds peer ids
and figures a peer chose).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from protocol import for_html, for_markdown, for_rich
from scheduler.results import (
    AgreedChange,
    CampaignReport,
    GroupVerification,
    ReplicaFigure,
    short_peer,
    shown,
)

if TYPE_CHECKING:
    from rich.table import Table

HEAD: Final = (
    "class",
    "job",
    "outcome",
    "agreed ms",
    "band",
    "replicas (peer ms network verdict)",
    "outlier",
)
"""The columns of every medium's table (report.html and Markdown add `why`)."""
NUMERIC: Final = frozenset({"agreed ms", "band"})
NOTHING_AGREED: Final = "nothing was replicated: no figure below is verified"
"""What the muted line says first where verification was asked but no group agreed on a figure."""
NONE_ASKED: Final = "no job asked verify: (replicas or spot checks): every figure is one peer's word"
"""The muted line of a campaign without replica groups."""
LEGEND: Final = (
    "one line per replica group: the agreed figure is the median of the agreeing majority (or the "
    "reference's); band: how far apart two replicas of the class may be and still agree"
)


def _band(group: GroupVerification) -> str:
    return "" if group.band is None else f"{group.band:.1%}"


def _job(group: GroupVerification) -> str:
    return f"{group.job_index} · {group.unit} · {group.model}"


def _replica(replica: ReplicaFigure) -> str:
    figure = shown(replica.figure_ms, 3) or "-"
    where = ", ".join(w for w in (replica.network, replica.owner) if w)  # an owner where declared
    network = f" [{where}]" if where else ""
    return f"{short_peer(replica.peer) or '(unplaced)'} {figure}{network} {replica.verdict}"


def _outcome(group: GroupVerification) -> str:
    return f"{group.outcome} (reference {short_peer(group.reference)})" if group.reference else group.outcome


def cells(group: GroupVerification) -> list[str]:
    """A group's cells as plain text, in `HEAD`'s order (each medium applies its own seam)."""
    return [
        group.device_class or "(no class)",
        _job(group),
        _outcome(group),
        shown(group.agreed_ms, 3),
        _band(group),
        "; ".join(_replica(r) for r in group.replicas),
        ", ".join(short_peer(p) for p in group.outliers),
    ]


def legend(report: CampaignReport) -> str:
    """The muted line over the table: `LEGEND`, led by `NOTHING_AGREED` where no group agreed."""
    agreed = any(g.verified for g in report.verification)
    return LEGEND if agreed else f"{NOTHING_AGREED}; {LEGEND}"


def verification_html(report: CampaignReport) -> list[str]:
    """report.html's section: the table (`id="verification"`), or a muted line where nothing was asked."""
    head = ["<h2>Verification</h2>"]
    if not report.verification:
        return [*head, f'<p class="muted" id="verification">{for_html(NONE_ASKED)}</p>']
    th = "".join(f"<th>{for_html(h)}</th>" for h in (*HEAD, "why"))
    numeric = {i for i, name in enumerate(HEAD) if name in NUMERIC}
    body = "".join(
        f'<tr data-outcome="{for_html(g.outcome)}">'
        + "".join(
            f'<td class="num">{for_html(c)}</td>' if i in numeric else f"<td>{for_html(c)}</td>"
            for i, c in enumerate([*cells(g), g.reason])
        )
        + "</tr>"
        for g in report.verification
    )
    return [
        *head,
        f'<p class="muted">{for_html(legend(report))}</p>',
        f'<div id="verification"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>',
    ]


def verification_markdown(report: CampaignReport) -> list[str]:
    """The same section for `report --format md`."""
    md = for_markdown
    out = ["## Verification", ""]
    if not report.verification:
        return [*out, f"_{md(NONE_ASKED)}_", ""]
    out += [
        f"_{md(legend(report))}_",
        "",
        "| " + " | ".join((*HEAD, "why")) + " |",
        "|---|---|---|---:|---:|---|---|---|",
    ]
    out += ["| " + " | ".join(md(c) for c in [*cells(g), g.reason]) + " |" for g in report.verification]
    return [*out, ""]


def verification_table(report: CampaignReport) -> Table | None:
    """The terminal's compact table after the matrix (None when no job asked verification); each
    group's reason under it where it has one."""
    if not report.verification:
        return None
    from rich.table import Table

    why = [
        f"{for_rich(g.device_class)} job {g.job_index}: {for_rich(g.reason)}"
        for g in report.verification
        if g.reason
    ]
    table = Table(
        title="verification: one agreed figure per class",
        caption="\n".join(why) or None,
        caption_justify="left",
    )
    for name in HEAD:
        table.add_column(name, justify="right" if name in NUMERIC else "left", overflow="fold")
    for group in report.verification:
        table.add_row(*(for_rich(c) for c in cells(group)))
    return table


def agreed_table(changes: Sequence[AgreedChange]) -> Table | None:
    """`report --diff`'s table of agreed figures: each (job, class) of the two campaigns, A's and B's
    agreed figure, the change, and whether it is beyond the band; where one side was not verified,
    it says so beside the figure (None when neither campaign asked verification)."""
    if not changes:
        return None
    from rich.table import Table

    table = Table(title="verification: agreed figures, A -> B", caption=DIFF_LEGEND, caption_justify="left")
    for name in ("class", "job", "A agreed ms", "B agreed ms", "change", "verdict", "bands"):
        table.add_column(name, justify="right" if name in DIFF_NUMERIC else "left", overflow="fold")
    for c in changes:
        change = "" if c.change_pct is None else f"{c.change_pct:+.1f}%"
        colour = "yellow" if c.verdict == "beyond the band" else "white"
        table.add_row(
            for_rich(c.device_class or "(no class)"),
            for_rich(f"{c.job_index} · {c.unit}"),
            shown(c.before_ms, 3),
            shown(c.after_ms, 3),
            change,
            f"[{colour}]{for_rich(c.verdict)}[/]",
            for_rich(c.note),
        )
    return table


DIFF_NUMERIC: Final = frozenset({"A agreed ms", "B agreed ms", "change"})
DIFF_LEGEND: Final = (
    "beyond the band: the agreed figures differ by more than the wider band of the two (not a "
    "significance test: the rows above test each pair on its raw samples)"
)
