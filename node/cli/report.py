"""`sark-node report`: re-render a stored campaign (html, csv, json, md) or diff two campaigns."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from node.cli.options import ConfigOpt, DataDirOpt, JsonOpt, build_config, fail

if TYPE_CHECKING:
    from node.submitter.store import CampaignStore


class Format(enum.StrEnum):
    """What `report` writes."""

    HTML = "html"
    CSV = "csv"
    JSON = "json"
    MD = "md"


CampaignArg = Annotated[
    str | None, typer.Argument(help="a stored campaign id, or a results.json file (or its folder)")
]
DiffOpt = Annotated[
    tuple[str, str] | None,
    typer.Option("--diff", help="compare campaign A with B (ids or results.json paths)", metavar="A B"),
]
FormatOpt = Annotated[Format, typer.Option("--format", help="html, csv, json or md")]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="write here (html default: ./<campaign>-report.html; else stdout)"),
]
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--threshold", help="smallest change of the median that counts, percent (default 5)", min=0.0
    ),
]
AlphaOpt = Annotated[
    float | None,
    typer.Option(
        "--alpha", help="significance level of the Mann-Whitney test (default 0.05)", min=0.0, max=1.0
    ),
]


def store_document(store: CampaignStore, campaign_id: str) -> dict[str, Any] | None:
    """A stored campaign as a results.json document (every task's row, raw samples, signed parts)."""
    from node.submitter.outputs import campaign_rows, results_document
    from node.submitter.run import restore  # loads libp2p: only when a stored campaign is asked for

    record = store.campaign(campaign_id)
    if record is None:
        return None
    run = restore(record)
    rows = campaign_rows(run.scheduler, store.results(campaign_id), record.created_utc, run.campaign)
    return results_document(campaign_id, run.campaign, rows)


def _document(name: str, data_dir: Path | None, config_file: Path | None) -> dict[str, Any]:
    """A campaign by results.json path (file or folder) or by id in this node's store; exits 2 if neither."""
    from node.report.render import load_document
    from node.submitter.store import CampaignStore

    path = Path(name)
    if path.is_file() or (path.is_dir() and (path / "results.json").is_file()):
        try:
            return load_document(path)
        except (OSError, ValueError) as exc:
            fail(f"error: cannot read {path}: {exc}", 2)
    config = build_config(config_file, data_dir=data_dir)
    store_path = config.data.campaigns
    document = store_document(CampaignStore(store_path), name) if store_path.is_file() else None
    if document is None:
        fail(f"error: no campaign {name} in {config.data_dir} (and no results.json at that path)", 2)
    return document


def _render(document: dict[str, Any], fmt: Format) -> str:
    import scheduler as sch
    from node.report.render import render_html
    from node.report.tables import render_markdown

    if fmt is Format.HTML:
        return render_html(document)
    if fmt is Format.CSV:
        return sch.to_csv(r["row"] for r in document["results"])
    if fmt is Format.JSON:
        return json.dumps(document, indent=1) + "\n"
    return render_markdown(document)


def report(
    campaign: CampaignArg = None,
    diff: DiffOpt = None,
    fmt: FormatOpt = Format.HTML,
    out: OutOpt = None,
    threshold: ThresholdOpt = None,
    alpha: AlphaOpt = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-render a campaign's report from the store, or diff two campaigns (--diff A B)."""
    if (campaign is None) == (diff is None):
        fail("error: give a campaign id (or results.json), or --diff A B", 2)
    if diff is not None:
        from scheduler.results import DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT

        bounds = (
            DEFAULT_THRESHOLD_PCT if threshold is None else threshold,
            DEFAULT_ALPHA if alpha is None else alpha,
        )
        _diff(diff, bounds, data_dir, config_file, as_json)
        return
    assert campaign is not None
    document = _document(campaign, data_dir, config_file)
    text = _render(document, fmt)
    if out is None and fmt is Format.HTML:
        out = Path(f"{document.get('campaign_id') or 'campaign'}-report.html")
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(str(out))


def _diff(
    names: tuple[str, str],
    bounds: tuple[float, float],
    data_dir: Path | None,
    config_file: Path | None,
    as_json: bool,
) -> None:
    from node.cli.console import console as out_console
    from node.report.tables import diff_table
    from scheduler.results import diff_entries, entries_from_document

    threshold, alpha = bounds
    before, after = (_document(n, data_dir, config_file) for n in names)
    rows = diff_entries(entries_from_document(before), entries_from_document(after), threshold, alpha)
    ids = [d.get("campaign_id", n) for d, n in zip((before, after), names, strict=True)]
    if as_json:
        print(
            json.dumps(
                {
                    "a": ids[0],
                    "b": ids[1],
                    "threshold_pct": threshold,
                    "alpha": alpha,
                    "rows": [r.model_dump(mode="json") for r in rows],
                }
            )
        )
        return
    console = out_console()
    console.print(diff_table(rows, f"A = {ids[0]}  ->  B = {ids[1]}"))
    regressions = sum(r.regression for r in rows)
    console.print(
        f"{regressions} regression(s), {sum(r.improvement for r in rows)} improvement(s) "
        f"(significant: Mann-Whitney p < {alpha:g} on raw samples, change >= {threshold:g}%, "
        "process medians apart)"
    )


def register(app: typer.Typer) -> None:
    """Add the report command to the CLI."""
    app.command()(report)
