"""The views of generate tasks: report.html's lead table (TTFT, TPOT, ITL, decode tok/s, ROUGE-L per
device, each header naming its formula: `scheduler.results.llmview`), its TTFT and TPOT distributions and
quality table; the same lead table in Markdown; and the terminal's vertical table at the end of `submit`.

Read from the report's signed measurements (`generation.records`, every request's raw record), so a
re-rendered report draws the same pictures. Tensor-only campaigns get nothing from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final

from node.report.pictures import LEGIBLE, Picture, drawn, inside, left_out, log_ticks, svg_of
from protocol import GenerationStats, for_html, for_markdown, for_rich, visible
from protocol.genstats import tpot_ms
from protocol.sessions import ttft_by_turn_text
from scheduler.results import (
    COST_FIGURES,
    LLM_FIGURES,
    THROUGHPUT,
    CampaignReport,
    Costs,
    LlmFigure,
    Price,
    costs_of,
    headline,
    lead_figures,
    price_text,
    short_task,
)

_COSTS: Final = tuple(f for f in COST_FIGURES if f.key in ("per_m_tokens", "tokens_per_joule"))
"""The cost figures of the LLM view: $ / M output tokens (beside the price and its source) and tokens / J."""

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table


@dataclass(frozen=True)
class Stability:
    """A generate task's stability verdict (judged on TPOT), as its derived measurement gives it."""

    unstable: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Costing:
    """A generate task's price with its source, and what its tokens cost (`scheduler.results.prices`)."""

    price: Price | None
    costs: Costs

    def cells(self) -> tuple[str, str]:
        """Its $ / M output tokens (with the price and source) and its tokens / J, as a table shows them."""
        per_m, per_j = self.costs.per_m_tokens, self.costs.tokens_per_joule
        money = f"{per_m:.3g} at {price_text(self.price)}" if per_m is not None else price_text(self.price)
        return money, f"{per_j:.3g}" if per_j is not None else ""


Run = tuple[str, GenerationStats, Stability, Costing]


def _generations(report: CampaignReport) -> list[Run]:
    """(label, stats, stability) of every measured generate task: the label (device name, compute
    unit and task) from its row, the figures and the verdict from its derived measurement."""
    found = []
    for task in report.results:
        measured = task.measurement
        if measured is None or measured.generation is None:
            continue
        row = task.row
        label = visible(
            f"{row.get('DeviceName', '?')} · {row.get('ComputeUnits', '?')} · {row.get('JobId', '')}"
        )
        stability = Stability(measured.unstable, tuple(measured.unstable_reasons))
        costing = Costing(task.price, costs_of(measured, task.price))
        found.append((label, measured.generation, stability, costing))
    return found


def _short(label: str) -> tuple[str, str]:
    """A run's label as a table or picture shows it, device · unit · the job's short id ("job-0-0"),
    and the whole task id (the whole id filled the first column); (label, "") when it names no job."""
    head, _, task = label.rpartition(" · ")
    short = short_task(task)
    if not head or short == task:
        return label, ""
    return f"{head} · {short}", task


def _label_html(label: str) -> str:
    """A run's label in an HTML table: the short label, the whole task id in its title."""
    short, task = _short(label)
    return f'<span title="{for_html(task)}">{for_html(short)}</span>' if task else for_html(label)


SPAN: Final = 10.0
"""A request-time axis is logarithmic when its figures span more than this ratio (one row 26x another
sat at 0 on a linear axis)."""


def _distributions_svg(runs: list[Run]) -> Picture:
    import math

    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 1.2 + 0.45 * len(runs)), layout="constrained")
    ttft_ax, tpot_ax = fig.subplots(1, 2)
    labels = [_short(label)[0] for label, _, _, _ in runs]
    ttfts = [inside(r.ttft_ms for r in s.records if r.ttft_ms is not None) for _, s, _, _ in runs]
    tpots = [inside(t for r in s.records if (t := tpot_ms(r)) is not None) for _, s, _, _ in runs]
    ttft, tpot = LLM_FIGURES[0], LLM_FIGURES[1]
    for ax, data, figure in ((ttft_ax, ttfts, ttft), (tpot_ax, tpots, tpot)):
        every = [v for kept, _ in data for v in kept]
        log = bool(every) and min(every) > 0 and max(every) / min(every) > SPAN
        values = [kept or [math.nan] for kept, _ in data]  # a row without requests: no box, not a dot at 0
        drawn = ax.boxplot(values, orientation="horizontal", tick_labels=labels, flierprops={"markersize": 2})
        for k, line in enumerate(drawn["medians"]):  # named in the SVG: a reader's check finds each median
            line.set_gid(f"{figure.key}-median-{k}")
        ax.invert_yaxis()
        scale = ""
        if log:
            ax.set_xscale("log")
            log_ticks(ax.xaxis)
            scale = ", log"
        head = f"{figure.label}{scale}, each request"
        ax.set_xlabel(f"{head}\n{figure.formula.removesuffix(', median')}")
        ax.set_title(f"{figure.label.split()[0]}, every request", fontsize=LEGIBLE)
    tpot_ax.set_yticks([])
    dropped = sum(n for _, n in ttfts) + sum(n for _, n in tpots)
    return Picture(svg_of(fig, "gen"), left_out(dropped, "request times"))


def _quality_table(runs: list[Run]) -> str:
    head = ("device · unit · task", "requests", "output tokens (mean)", "ROUGE-1", "ROUGE-2", "ROUGE-L")
    rows = []
    for label, s, _, _ in runs:
        r = s.rouge
        scores = [f"{v:.4f}" for v in (r.rouge1, r.rouge2, r.rouge_l)] if r else ["", "", ""]
        rows.append([_label_html(label), str(s.requests), f"{s.output_tokens_mean:.1f}", *scores])
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _value(stats: GenerationStats, figure: LlmFigure) -> str:
    value = headline(stats, figure)
    if value is None:
        return ""
    return f"{value:.3f}" if figure.key == "rouge_l" else f"{value:.1f}"


def _stability(s: Stability) -> str:
    """Why a task is flagged unstable (judged on TPOT), or "stable"."""
    return "unstable: " + "; ".join(s.reasons) if s.unstable else "stable"


def _lead_html(runs: list[Run]) -> str:
    """The LLM figures per device, each header naming its formula: the first table of an LLM report."""
    figures = lead_figures([s for _, s, _, _ in runs])
    th = "".join(
        f'<th title="{for_html(f.titled)}">{for_html(f.label)}<br><small class="muted">'
        f"{for_html(f.formula)}</small></th>"
        for f in figures
    )
    body = "".join(
        f"<tr><td>{_label_html(label)}</td>"
        + "".join(f'<td class="num">{_value(s, f)}</td>' for f in figures)
        + f'<td class="num">{for_html(_requests(s)[0])}</td><td>{for_html(_stability(row))}</td>'
        + "".join(f'<td class="num">{for_html(c)}</td>' for c in cost.cells())
        + "</tr>"
        for label, s, row, cost in runs
    )
    requests = (
        '<th>requests<br><small class="muted">succeeded / requests: the figures are theirs</small></th>'
    )
    money = "".join(
        f'<th>{for_html(f.label)}<br><small class="muted">{for_html(f.formula)}</small></th>' for f in _COSTS
    )
    head = f"<tr><th>device · unit · task</th>{th}{requests}<th>stability (judged on TPOT)</th>{money}</tr>"
    return f'<table class="lead"><thead>{head}</thead><tbody>{body}</tbody></table>'


def lead_parts(report: CampaignReport) -> list[str]:
    """The first section of a report with generate tasks: TTFT, TPOT, ITL, decode tok/s, ROUGE-L."""
    runs = _generations(report)
    if not runs:
        return []
    return [
        "<h2>Generation: TTFT, TPOT, ITL, decode tok/s and ROUGE-L per device</h2>",
        f'<div id="generation-lead">{_lead_html(runs)}</div>',
    ]


def generation_parts(report: CampaignReport) -> list[str]:
    """The HTML sections for the report's generate tasks (none when it has none)."""
    runs = _generations(report)
    if not runs:
        return []
    return [
        "<h2>Generation: TTFT and TPOT per device</h2>",
        drawn(
            "TTFT and TPOT per device",
            partial(_distributions_svg, runs),
            element_id="generation-latency",
            css_class="distributions",
        ),
        "<h2>Generation quality</h2>",
        f'<div id="generation-quality">{_quality_table(runs)}</div>',
        *_session_parts(runs),
    ]


def _session_parts(runs: list[Run]) -> list[str]:
    """The sessions section (none when no run replayed sessions)."""
    if not any(s.sessions is not None for _, s, _, _ in runs):
        return []
    return [
        "<h2>Sessions: TTFT by turn index and each session's figures</h2>",
        "<p class=\"muted\">turn k's request carries turns 1..k-1 with the server's own answers; "
        "a failed turn ends its session</p>",
        _sessions_html(runs),
    ]


def lead_markdown(report: CampaignReport) -> list[str]:
    """The same first table for `report --format md`, the formulas listed under it."""
    runs = _generations(report)
    if not runs:
        return []
    figures = tuple(f for f in lead_figures([s for _, s, _, _ in runs]) if f is not THROUGHPUT)
    lines = ["## Generation: LLM figures per device", ""]
    labels = " | ".join(f.label for f in figures)
    money = " | ".join(f.label for f in _COSTS)
    lines.append(f"| device · unit · task | {labels} | requests | stability | {money} |")
    lines.append("|---|" + "---:|" * (len(figures) + 1) + "---|" + "---:|" * len(_COSTS))
    for label, s, row, cost in runs:
        cells = " | ".join(_value(s, f) for f in figures)
        ok = for_markdown(_requests(s)[0])
        paid = " | ".join(for_markdown(c) for c in cost.cells())
        short = for_markdown(_short(label)[0])  # the campaign id heads the page: the task's own id suffices
        lines.append(f"| {short} | {cells} | {ok} | {for_markdown(_stability(row))} | {paid} |")
    notes = [f"- {f.titled}" for f in (*figures, THROUGHPUT)] + [f"- {f.label} = {f.formula}" for f in _COSTS]
    return [*lines, "", *notes, ""]


def _client_rows(table: Table, s: GenerationStats) -> None:
    """An endpoint run's load client: the send rate it held against the asked one, its send lag, its
    CPU, and whether it was saturated and why (`protocol.clientload`)."""
    if s.client_cpu_pct is None and s.schedule_lag_ms_p99 is None:
        return
    asked = "" if s.request_rate is None else f" of {s.request_rate:g}"
    if s.request_rate_achieved is not None:
        table.add_row(
            "sent req/s", f"{s.request_rate_achieved:.1f}{asked}", "sent within the schedule's span / span"
        )
    if s.schedule_lag_ms_p99 is not None:
        lag = f"{s.schedule_lag_ms_p50 or 0.0:.2f} / {s.schedule_lag_ms_p99:.2f}"
        table.add_row("send lag ms p50/p99", lag, "actual - planned send time")
    if s.client_cpu_pct is not None:
        table.add_row("client CPU %", f"{s.client_cpu_pct:.0f}", "client process CPU / run wall time")
    if s.unsent:
        table.add_row("unsent", str(s.unsent), "planned sends the deadline came before")
    verdict = "[red]saturated[/]" if s.client_saturated else "held"
    table.add_row("client", verdict, for_rich(s.client_saturated_reason or "held its schedule"))


def _served(s: GenerationStats) -> bool:
    """Whether the figures are a model server's, measured over the network (its client's CPU or its
    round trip recorded), not a runtime's on the worker (white-box: no server to send to)."""
    return s.client_cpu_pct is not None or s.rtt_ms is not None


def _session_rows(table: Table, s: GenerationStats) -> None:
    """A session run's figures (`protocol.sessions`): TTFT by turn index, and its sessions."""
    sessions = s.sessions
    if sessions is None:
        return
    by_turn = ttft_by_turn_text(s.by_turn)
    table.add_row("TTFT ms by turn", by_turn, "turn: median TTFT of that turn's requests")
    done = f"{sessions.completed}/{sessions.sessions}"
    table.add_row("sessions", done, "completed (every turn succeeded) / started")
    turns = f"{sessions.turns_mean:.2f} of {sessions.turns_asked_mean:.2f}"
    table.add_row("turns per session", turns, "succeeded of asked, mean over sessions")
    during = f"{sessions.duration_s.median:.2f}" if sessions.duration_s.n else "-"
    table.add_row("session s", during, "first turn sent -> last token, think time included, median")
    tokens = f"{sessions.prompt_tokens_mean:.0f} / {sessions.output_tokens_mean:.0f}"
    table.add_row("session tokens in/out", tokens, "summed over its turns, mean over sessions")


def _sessions_html(runs: list[Run]) -> str:
    """Per device: its sessions' figures, then TTFT by turn index (a prefix cache shows at turn > 1)."""
    shown = [(label, s, s.sessions) for label, s, _, _ in runs if s.sessions is not None]
    most = max((len(s.by_turn) for _, s, _ in shown), default=0)
    head = [
        "device · unit · task",
        "sessions completed / started",
        "turns per session (of asked)",
        "session s (median)",
        "session tokens in / out",
    ]
    head += [f"TTFT ms turn {k}" for k in range(1, most + 1)]
    rows = []
    for label, s, n in shown:
        assert n is not None
        turns = {t.turn: f"{t.ttft_ms.median:.1f}" if t.ttft_ms.n else "" for t in s.by_turn}
        rows.append(
            [
                _label_html(label),
                f"{n.completed}/{n.sessions}",
                f"{n.turns_mean:.2f} ({n.turns_asked_mean:.2f})",
                f"{n.duration_s.median:.2f}" if n.duration_s.n else "",
                f"{n.prompt_tokens_mean:.0f} / {n.output_tokens_mean:.0f}",
                *(turns.get(k, "") for k in range(1, most + 1)),
            ]
        )
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' for c in row) + "</tr>" for row in rows)
    return f'<table id="generation-sessions"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _requests(s: GenerationStats) -> tuple[str, str]:
    """The requests line: succeeded of all, the error share beside them, and every attempt the server
    received (retries included) when the result says."""
    share = f" ({s.errors / s.requests:.0%} failed)" if s.errors and s.requests else ""
    how = "succeeded / requests; every figure is over the successful ones"
    if s.requests_sent is not None and _served(s):
        how += f"; {s.requests_sent} sent to the server, retries included"
    return f"{s.requests - s.errors}/{s.requests}{share}", how


def generation_table(report: CampaignReport) -> Group | None:
    """The generate tasks' figures for the terminal (None when there are none): what an LLM run is for.

    One vertical table per task, a figure a line with its formula beside it, as `vllm bench serve`
    prints its result: it reads at 80 columns, and the stability line says why a row is unstable.
    """
    runs = _generations(report)
    if not runs:
        return None
    from rich.console import Group
    from rich.table import Table

    labels = [
        label.rsplit(" · ", 1)[0] for label, _, _, _ in runs
    ]  # the task id only where it tells runs apart
    if len(set(labels)) < len(labels):
        labels = [label for label, _, _, _ in runs]
    tables = []
    for label, (_, s, row, cost) in zip(labels, runs, strict=True):
        table = Table(title=f"generation: {for_rich(label)}", title_justify="left")
        table.add_column("figure", no_wrap=True)
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("how it is measured", overflow="fold")
        table.add_row("requests", *_requests(s))
        for figure in lead_figures([s]):
            table.add_row(figure.label, _value(s, figure) or "-", figure.formula)
        table.add_row(
            "TTFT ms p90", f"{s.ttft_ms.p90:.1f}" if s.ttft_ms.n else "-", "90th percentile over requests"
        )
        ok = s.requests > s.errors
        table.add_row("output tokens", f"{s.output_tokens_mean:.1f}" if ok else "-", "mean over requests")
        stable = _stability(row)
        table.add_row("stability", "stable" if stable == "stable" else "[red]unstable[/]", for_rich(stable))
        for money, value in zip(_COSTS, cost.cells(), strict=True):
            table.add_row(money.label, for_rich(value) or "-", money.formula)
        _client_rows(table, s)
        _session_rows(table, s)
        tables.append(table)
    return Group(*tables)
