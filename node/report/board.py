"""`sark-node board`: many campaigns' bundles as one static site that opens from the file system.

`build_board(folders, out)` verifies each new results folder (`node.report.bundles.verify_folder`:
one that does not hold is refused, and nothing is written), copies its results.json, bundle.json and
report.html under `out/proof/<campaign id>/` (byte for byte: the proof travels with the board, and
every link is relative), then draws `out/index.html` from every campaign under `out/proof/`, each
verified again. So the board is incremental (a later call with one more folder adds it; the ones
before stay) and deterministic (the same bundles give the same bytes: no clock, no absolute path,
rows sorted). The page needs no server and no network: its style and its filters (plain JS) are
inline. Other tools' results kept by `sark-node import` (`node.report.imports`) are drawn in a third
table, apart: another tool's word, not verified, each row naming what that tool measured and linking
the tool's own file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from node.report.bundles import read_capped, verify_folder
from node.report.imports import IMPORTED, Kept, kept_imports
from protocol import for_html
from scheduler.results import CampaignReport
from scheduler.results.board import BoardRow, board_rows
from scheduler.results.bundle import BUNDLE_FILE
from scheduler.results.imported import ImportedRow, Unreadable
from scheduler.results.proof import RESULTS_FILE, BundleError, Problem

PROOF: Final = "proof"
"""The folder under the board's that keeps each campaign's proof."""
COPIED: Final = (RESULTS_FILE, BUNDLE_FILE, "report.html")
SAFE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class Refused:
    """A folder the board did not take: it is no bundle, or its bundle does not hold."""

    folder: str
    problems: tuple[str, ...]
    unreadable: bool


def build_board(folders: Sequence[Path], out: Path) -> Path | Refused:
    """Add `folders` to the board in `out` and draw it; `out/index.html`, or the first folder refused."""
    adding: list[tuple[Path, str]] = []
    for folder in folders:
        found = _checked(folder)
        if isinstance(found, Refused):
            return found
        adding.append((folder, found))
    for folder, campaign_id in adding:
        target = out / PROOF / campaign_id
        target.mkdir(parents=True, exist_ok=True)
        for name in COPIED:
            if (folder / name).is_file():
                shutil.copyfile(folder / name, target / name)
    reports = []
    for kept in sorted((out / PROOF).iterdir()) if (out / PROOF).is_dir() else ():
        found = _checked(kept)
        if isinstance(found, Refused):
            return found
        reports.append(CampaignReport.from_json(read_capped(kept / RESULTS_FILE), source=str(kept)))
    imported = kept_imports(out)
    if isinstance(imported, Unreadable):
        return Refused(str(out / IMPORTED), (str(imported),), unreadable=True)
    page = out / "index.html"
    temp = out / ".index.html.part"
    out.mkdir(parents=True, exist_ok=True)
    reported = {r.campaign_id for r in reports if (out / PROOF / r.campaign_id / "report.html").is_file()}
    temp.write_text(render_board(reports, reported, imported))
    os.replace(temp, page)  # whole or not at all
    return page


def _checked(folder: Path) -> str | Refused:
    """The folder's campaign id once its bundle holds, else why not."""
    try:
        proof = verify_folder(folder)
    except BundleError as exc:
        return Refused(str(folder), (str(exc),), unreadable=True)
    if not proof.holds:
        return Refused(str(folder), tuple(str(p) for p in proof.problems), unreadable=False)
    report = CampaignReport.from_json(read_capped(folder / RESULTS_FILE), source=str(folder))
    campaign_id = report.campaign_id
    if not campaign_id or campaign_id[0] == "." or not set(campaign_id) <= SAFE:
        cause = Problem(RESULTS_FILE, f"campaign id {campaign_id!r} is no folder name")
        return Refused(str(folder), (str(cause),), unreadable=True)
    return campaign_id


STYLE: Final = """
body{font:14px system-ui,sans-serif;margin:24px;color:#1b1b1b}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;width:100%;margin-top:8px}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}td.n{text-align:right}
.filters{display:flex;gap:12px;flex-wrap:wrap;align-items:center}
.ok{color:#116611}.note{color:#555}
"""
SCRIPT: Final = """
(() => {
  const pick = id => document.getElementById(id);
  const apply = () => {
    const want = {model: pick("f-model").value, runtime: pick("f-runtime").value,
                  cls: pick("f-class").value};
    const text = pick("f-text").value.toLowerCase();
    const onlyVerified = pick("f-verified").checked;
    for (const tr of document.querySelectorAll("tbody tr")) {
      const d = tr.dataset;
      const show = (!want.model || d.model === want.model) && (!want.runtime || d.runtime === want.runtime)
        && (!want.cls || d.cls === want.cls) && (!onlyVerified || d.verified === "1")
        && (!text || tr.textContent.toLowerCase().includes(text));
      tr.hidden = !show;
    }
  };
  for (const id of ["f-model", "f-runtime", "f-class", "f-text", "f-verified"]) {
    pick(id).addEventListener("input", apply);
  }
  apply();
})();
"""
HEAD: Final = ("model", "device class", "runtime", "median ms", "verified", "devices", "$ / 1k inf.",
               "inf. / J", "proof")  # fmt: skip


def render_board(
    reports: Iterable[CampaignReport], reported: Set[str] = frozenset(), imported: Sequence[Kept] = ()
) -> str:
    """The board's page: the verified rows, then the single ones, with filters and each row's proof
    (`reported`: the campaigns whose report.html the board keeps), then other tools' rows (`imported`)."""
    reports = sorted(reports, key=lambda r: r.campaign_id)
    rows = sorted(row for report in reports for row in board_rows(report))
    verified = [r for r in rows if r.verified]
    single = [r for r in rows if not r.verified]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>sark-node board</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>sark-node board</h1>",
        f'<p class="note">{len(reports)} campaign(s), each checked with <code>sark-node verify</code> '
        "(every signature, every figure derived again from its signed raw parts, every group's agreement "
        "recomputed); each row links its proof.</p>",
        _filters(rows),
        f'<h2 id="verified">Verified: replicas of one class agreed ({len(verified)})</h2>',
        _table("verified-rows", verified, reported),
        f'<h2 id="single">Single: one device\'s word, not verified ({len(single)})</h2>',
        _table("single-rows", single, reported),
        *_imported_parts(imported),
        "<h2>Campaigns</h2><ul>",
        *(_campaign(report) for report in reports),
        "</ul>",
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _filters(rows: Sequence[BoardRow]) -> str:
    def select(id_: str, label: str, values: Iterable[str]) -> str:
        options = "".join(
            f'<option value="{for_html(v)}">{for_html(v)}</option>' for v in sorted(set(values))
        )
        return f'<label>{label} <select id="{id_}"><option value="">all</option>{options}</select></label>'

    return (
        '<div class="filters">'
        + select("f-model", "model", (r.model for r in rows))
        + select("f-runtime", "runtime", (r.runtime for r in rows))
        + select("f-class", "device class", (r.device_class for r in rows))
        + '<label>text <input id="f-text" type="search"></label>'
        + '<label><input id="f-verified" type="checkbox"> verified only</label></div>'
    )


def _table(id_: str, rows: Sequence[BoardRow], reported: Set[str]) -> str:
    head = "".join(f"<th>{h}</th>" for h in HEAD)
    body = "".join(_row(r, r.campaign_id in reported) for r in rows)
    return f'<table id="{id_}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _row(r: BoardRow, reported: bool) -> str:
    folder = f"{PROOF}/{r.campaign_id}"
    links = (
        f'<a href="{for_html(folder)}/{RESULTS_FILE}">results.json</a> · '
        f'<a href="{for_html(folder)}/{BUNDLE_FILE}">bundle.json</a>'
    )
    if reported:
        links += f' · <a href="{for_html(folder)}/report.html">report</a>'

    data = (
        f'data-model="{for_html(r.model)}" data-runtime="{for_html(r.runtime)}" '
        f'data-cls="{for_html(r.device_class)}" data-verified="{int(r.verified)}"'
    )
    cells = (
        for_html(r.model),
        for_html(r.device_class),
        for_html(r.runtime),
        f"{r.figure_ms:.4g}",
        f'<span class="{"ok" if r.verified else "note"}">{for_html(r.label)}</span>',
        for_html(r.devices),
        for_html(r.cost_per_1k),
        for_html(r.per_joule),
        f'{links} <span class="note">{for_html(r.campaign_id)} · {for_html(r.anchor)}</span>',
    )
    numeric = {3, 6, 7}
    tds = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(cells))
    return f"<tr {data}>{tds}</tr>"


def _campaign(report: CampaignReport) -> str:
    name = for_html(report.campaign.name)
    folder = f"{PROOF}/{for_html(report.campaign_id)}"
    return f'<li>{name}: <a href="{folder}/{RESULTS_FILE}">{for_html(report.campaign_id)}</a></li>'


IMPORTED_HEAD: Final = ("tool", "model", "target", "setting", "what the tool measured", "requests", "source")


def _imported_parts(imported: Sequence[Kept]) -> list[str]:
    """The imported rows' heading and table (nothing when none is kept)."""
    rows = sorted((row, folder, name) for folder, name, found in imported for row in found)
    if not rows:
        return []
    head = "".join(f"<th>{h}</th>" for h in IMPORTED_HEAD)
    body = "".join(_imported_row(row, folder, name) for row, folder, name in rows)
    return [
        f'<h2 id="imported">Imported: another tool\'s word, not verified ({len(rows)})</h2>',
        '<p class="note">Read from each tool\'s own file, as the tool named and measured it; '
        "no signature, no raw part derived again, no replica.</p>",
        f'<table id="imported-rows"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]


def _imported_row(r: ImportedRow, folder: str, name: str) -> str:
    figures = "<br>".join(f"{for_html(f.name)} = {f.value:.4g} {for_html(f.unit)}" for f in r.figures)
    link = f'<a href="{IMPORTED}/{for_html(folder)}/{for_html(name)}">{for_html(name)}</a>'
    cells = (
        for_html(r.named),
        for_html(r.model),
        for_html(r.target),
        for_html(r.setting),
        figures,
        for_html(r.requests),
        link,
    )
    data = f'data-model="{for_html(r.model)}" data-runtime="" data-cls="" data-verified="0"'
    return f"<tr {data}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
