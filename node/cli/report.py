"""`sark-node report`: re-render a stored campaign (html, csv, json, md) or diff two campaigns."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from node.cli.options import ConfigOpt, DataDirOpt, JsonOpt, build_config, fail

if TYPE_CHECKING:
    from node.report.roofline import Costs
    from node.submitter.store import CampaignStore
    from scheduler.results import CampaignReport


class Format(enum.StrEnum):
    """What `report` writes."""

    HTML = "html"
    CSV = "csv"
    JSON = "json"
    MD = "md"
    AIPERF = "aiperf"


CampaignArg = Annotated[
    str | None, typer.Argument(help="a stored campaign id, or a results.json file (or its folder)")
]
DiffOpt = Annotated[
    tuple[str, str] | None,
    typer.Option("--diff", help="compare campaign A with B (ids or results.json paths)", metavar="A B"),
]
FormatOpt = Annotated[
    Format,
    typer.Option("--format", help="html, csv, json, md, or aiperf (each request's record, AIPerf's JSONL)"),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out", help="write here (html default: report.html beside the campaign's results.csv; else stdout)"
    ),
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
RankOpt = Annotated[
    str,
    typer.Option(
        "--rank",
        help="rank by a cost figure, the best first: per_1k_inferences, per_m_tokens, inferences_per_joule "
        "or tokens_per_joule (the cost table; with --diff, the pairs by B's figure)",
    ),
]


def store_report(store: CampaignStore, campaign_id: str) -> tuple[CampaignReport, Path] | None:
    """A stored campaign's report (every task's row, raw samples, signed parts), built from the store,
    and the folder its files were written to (`submit`'s ``sark-results/<id>``, or `--out`'s)."""
    from node.submitter.outputs import campaign_report
    from node.submitter.run import restore  # loads libp2p: only when a stored campaign is asked for

    record = store.campaign(campaign_id)
    if record is None:
        return None
    run = restore(record)
    results = store.results(campaign_id)
    folder = Path(record.out_dir) if record.out_dir else Path("sark-results") / campaign_id
    swarm = record.swarm or ()
    return campaign_report(
        run.scheduler, results, record.created_utc, campaign_id, run.campaign, swarm
    ), folder


def read_report(path: Path) -> CampaignReport:
    """The report a results.json holds (the file, or the folder holding it), read once.

    Raises:
        OSError: the file cannot be read.
        ResultsFileError: it is no results.json this version reads; each problem named with the file.
    """
    from scheduler.results import CampaignReport

    file = path / "results.json" if path.is_dir() else path
    return CampaignReport.from_json(file.read_bytes(), source=str(file))


def _report(name: str, data_dir: Path | None, config_file: Path | None) -> tuple[CampaignReport, Path]:
    """A campaign by results.json path (file or folder) or by id in this node's store, and the folder
    of its files (that results.json's; the stored campaign's); exits 2 if neither."""
    from node.submitter.store import CampaignStore
    from scheduler.results import ResultsFileError

    path = Path(name)
    if path.is_file() or (path.is_dir() and (path / "results.json").is_file()):
        try:
            return read_report(path), path if path.is_dir() else path.parent
        except ResultsFileError as exc:
            fail(f"error: {exc.detail}", 2)
        except OSError as exc:
            fail(f"error: cannot read {path}: {exc}", 2)
    config = build_config(config_file, data_dir=data_dir)
    store_path = config.data.campaigns
    found = store_report(CampaignStore(store_path), name) if store_path.is_file() else None
    if found is None:
        fail(f"error: no campaign {name} in {config.data_dir} (and no results.json at that path)", 2)
    return found


def _costs(name: str, data_dir: Path | None, config_file: Path | None) -> Costs | None:
    """A stored campaign's models counted for the roofline, as `submit` counted them (None: `name` is a
    results.json, which holds no count, or the campaign is not in this node's store)."""
    from node.submitter.models import refs_from_json
    from node.submitter.outputs import model_costs
    from node.submitter.store import CampaignStore
    from node.transfer.cache import model_cache

    path = Path(name)
    if path.is_file() or (path.is_dir() and (path / "results.json").is_file()):
        return None
    config = build_config(config_file, data_dir=data_dir)
    store = config.data.campaigns
    record = CampaignStore(store).campaign(name) if store.is_file() else None
    if record is None:
        return None
    return model_costs(refs_from_json(record.models).values(), model_cache(config))


def _render(report: CampaignReport, fmt: Format, rank: str = "", costs: Costs | None = None) -> str:
    import scheduler as sch
    from node.report.render import render_html
    from node.report.tables import render_markdown

    if fmt is Format.HTML:
        return render_html(report, rank, costs)
    if fmt is Format.CSV:
        return sch.to_csv(task.row for task in report.results)
    if fmt is Format.JSON:
        return report.to_json() + "\n"
    if fmt is Format.AIPERF:
        from scheduler.results.aiperfrecords import aiperf_lines

        return "".join(f"{line}\n" for line in aiperf_lines(report))
    return render_markdown(report, rank)


def _checked_rank(rank: str) -> str:
    """`--rank` as given, or exit 2 naming the figures it may be."""
    from scheduler.results import RANKS

    if rank and rank not in RANKS:
        fail(f"error: --rank: no cost figure {rank!r}; one of {', '.join(RANKS)}", 2)
    return rank


def report(
    campaign: CampaignArg = None,
    diff: DiffOpt = None,
    fmt: FormatOpt = Format.HTML,
    out: OutOpt = None,
    threshold: ThresholdOpt = None,
    alpha: AlphaOpt = None,
    rank: RankOpt = "",
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-render a campaign's report from the store, or diff two campaigns (--diff A B).

    html goes beside the campaign's other files by default (its results.csv's folder: where `submit`
    wrote them, ``sark-results/<campaign>/``), replacing the report.html written there; the other
    formats go to stdout unless `--out` is given. `--rank` orders the cost table (performance per
    dollar and per watt) by one of its figures, and a diff's pairs by B's.
    """
    if (campaign is None) == (diff is None):
        fail("error: give a campaign id (or results.json), or --diff A B", 2)
    rank = _checked_rank(rank)
    if diff is not None:
        from scheduler.results import DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT

        bounds = (
            DEFAULT_THRESHOLD_PCT if threshold is None else threshold,
            DEFAULT_ALPHA if alpha is None else alpha,
        )
        _diff(diff, (bounds, rank), data_dir, config_file, as_json)
        return
    assert campaign is not None
    found, folder = _report(campaign, data_dir, config_file)
    costs = _costs(campaign, data_dir, config_file) if fmt is Format.HTML else None
    text = _render(found, fmt, rank, costs)
    if out is None and fmt is Format.HTML:
        out = folder / "report.html"
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(str(out))


def _diff(
    names: tuple[str, str],
    how: tuple[tuple[float, float], str],
    data_dir: Path | None,
    config_file: Path | None,
    as_json: bool,
) -> None:
    from node.cli.console import console as out_console
    from node.report.tables import diff_table
    from node.report.verifyreport import agreed_table
    from scheduler.results import agreed_changes, diff_entries, entries_of

    (threshold, alpha), rank = how
    before, after = (_report(n, data_dir, config_file)[0] for n in names)
    rows = diff_entries(entries_of(before), entries_of(after), threshold, alpha, rank)
    agreed = agreed_changes(before.verification, after.verification)  # where either asked verify:
    ids = [r.campaign_id or n for r, n in zip((before, after), names, strict=True)]
    if as_json:
        print(
            json.dumps(
                {
                    "a": ids[0],
                    "b": ids[1],
                    "threshold_pct": threshold,
                    "alpha": alpha,
                    "rank": rank,
                    "rows": [r.model_dump(mode="json") for r in rows],
                    "verification": [c.model_dump(mode="json") for c in agreed],
                }
            )
        )
        return
    console = out_console()
    console.print(diff_table(rows, f"A = {ids[0]}  ->  B = {ids[1]}"))
    if (verified := agreed_table(agreed)) is not None:
        console.print(verified)
    regressions = sum(r.regression for r in rows)
    console.print(
        f"{regressions} regression(s), {sum(r.improvement for r in rows)} improvement(s) "
        f"(significant: Mann-Whitney p < {alpha:g} on raw samples, change >= {threshold:g}%, "
        "process medians apart)"
    )


def register(app: typer.Typer) -> None:
    """Add the report command to the CLI."""
    app.command()(report)
