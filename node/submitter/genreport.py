"""report.html's part for generate tasks: TTFT and TPOT distributions per device, and a quality table;
and the terminal's table of the same figures at the end of `submit`.

Read from results.json's signed measurements (`generation.records`, every request's raw record), so a
re-rendered report draws the same pictures. Tensor-only campaigns get nothing from here.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from protocol import GenerationStats, for_html, for_rich, visible
from protocol.genstats import tpot_ms

if TYPE_CHECKING:
    from rich.table import Table


def _generations(document: Mapping[str, Any]) -> list[tuple[str, GenerationStats]]:
    """(label, stats) of every measured generate task: device name and compute unit."""
    found = []
    for entry in document.get("results", []):
        signed = entry.get("signed") or {}
        raw = (signed.get("measurement") or {}).get("generation")
        if raw is None:
            continue
        row = entry.get("row", {})
        label = visible(
            f"{row.get('DeviceName', '?')} · {row.get('ComputeUnits', '?')} · {row.get('JobId', '')}"
        )
        found.append((label, GenerationStats.model_validate(raw)))
    return found


def svg_of(figure: Any, salt: str) -> str:
    """A matplotlib figure as inline SVG, its ids salted so that several figures share one page."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _distributions_svg(runs: list[tuple[str, GenerationStats]]) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 1.2 + 0.45 * len(runs)), layout="constrained")
    ttft_ax, tpot_ax = fig.subplots(1, 2)
    labels = [label for label, _ in runs]
    ttfts = [[r.ttft_ms for r in s.records if r.ttft_ms is not None] or [0.0] for _, s in runs]
    tpots = [[t for r in s.records if (t := tpot_ms(r)) is not None] or [0.0] for _, s in runs]
    for ax, data, name in (
        (ttft_ax, ttfts, "time to first token"),
        (tpot_ax, tpots, "time per output token"),
    ):
        ax.boxplot(data, orientation="horizontal", tick_labels=labels, flierprops={"markersize": 2})
        ax.invert_yaxis()
        ax.set_xlabel(f"{name} (ms)")
        ax.set_title(f"{name}, every request", fontsize=10)
    tpot_ax.set_yticks([])
    return svg_of(fig, "gen")


def _quality_table(runs: list[tuple[str, GenerationStats]]) -> str:
    head = (
        "device · unit · task",
        "requests",
        "output tokens (mean)",
        "ROUGE-1",
        "ROUGE-2",
        "ROUGE-L",
        "tok/s",
    )
    rows = []
    for label, s in runs:
        r = s.rouge
        scores = [f"{v:.4f}" for v in (r.rouge1, r.rouge2, r.rouge_l)] if r else ["", "", ""]
        cells = [for_html(label), str(s.requests), f"{s.output_tokens_mean:.1f}", *scores]
        rows.append([*cells, f"{s.output_tok_per_s:.2f}"])
    th = "".join(f"<th>{for_html(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def generation_parts(document: Mapping[str, Any]) -> list[str]:
    """The HTML sections for the document's generate tasks (none when it has none)."""
    runs = _generations(document)
    if not runs:
        return []
    return [
        "<h2>Generation: TTFT and TPOT per device</h2>",
        f'<figure id="generation-latency" class="distributions">{_distributions_svg(runs)}</figure>',
        "<h2>Generation quality</h2>",
        f'<div id="generation-quality">{_quality_table(runs)}</div>',
    ]


def generation_table(document: Mapping[str, Any]) -> Table | None:
    """The generate tasks' medians as a rich table (None when there are none): what an LLM run is for."""
    runs = _generations(document)
    if not runs:
        return None
    from rich.table import Table

    table = Table(title="generation (ms; medians over requests)")
    labels = [label.rsplit(" · ", 1)[0] for label, _ in runs]  # the task id only where it tells runs apart
    if len(set(labels)) < len(labels):
        labels = [label for label, _ in runs]
    table.add_column("device · unit")
    for name in ("requests", "TTFT", "TTFT p90", "TPOT", "ITL p99", "E2E", "decode tok/s", "out tokens"):
        table.add_column(name, justify="right")
    table.add_column("ROUGE-L", justify="right")
    for label, (_, s) in zip(labels, runs, strict=True):
        table.add_row(
            for_rich(label),
            f"{s.requests - s.errors}/{s.requests}",
            *(f"{v:.1f}" for v in (s.ttft_ms.median, s.ttft_ms.p90, s.tpot_ms.median, s.itl_ms.p99)),
            f"{s.e2e_ms.median:.0f}",
            f"{s.decode_tok_per_s:.1f}",
            f"{s.output_tokens_mean:.1f}",
            f"{s.rouge.rouge_l:.3f}" if s.rouge else "",
        )
    return table
