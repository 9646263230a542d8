"""`sark-node verify FOLDER`: a campaign's results checked offline, by anyone (no network, any HOME);
`sark-node board FOLDER... --out DIR`: verified campaigns as one static board (`node/report/board.py`);
`sark-node import TOOL FILE [--board DIR]`: another tool's results (GuideLLM, AIPerf, vLLM, llama-bench) as
rows marked unverified, shown, and kept on a board apart from the verified rows (`node/report/imports.py`).

`verify`: exit 0 when every signature, figure and group holds; 1 when anything does not (each problem
one line, naming the file, the row and the field); 2 when the folder holds no bundle (the file, the stage, the
cause). What is checked and why: `scheduler/results/proof.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from node.cli.options import fail

SHOWN_PROBLEMS = 200
"""The most problems printed (a count of the rest follows)."""


def verify(
    folder: Annotated[Path, typer.Argument(help="a campaign's results folder (results.json, bundle.json)")],
) -> None:
    """Check a campaign's results offline: signatures, every figure derived again, every group's agreement."""
    from node.report.bundles import verify_folder
    from protocol import visible
    from scheduler.results.proof import BundleError

    try:
        proof = verify_folder(folder)
    except BundleError as exc:
        fail(f"error: not a bundle: {exc}", 2)
    typer.echo(f"submitter {proof.submitter}")
    typer.echo(
        f"{proof.rows} signed result(s) derived again, {proof.derived} merged or level row(s) from them; "
        f"{proof.groups} verification group(s) recomputed"
    )
    for note in proof.notes:
        typer.echo(visible(f"note: {note}"))
    for problem in proof.problems[:SHOWN_PROBLEMS]:
        typer.secho(visible(f"refused: {problem}"), fg=typer.colors.RED, err=True)
    if len(proof.problems) > SHOWN_PROBLEMS:
        typer.secho(f"... and {len(proof.problems) - SHOWN_PROBLEMS} more", fg=typer.colors.RED, err=True)
    if not proof.holds:
        fail(f"error: {len(proof.problems)} problem(s): the bundle does not hold", 1)
    typer.echo("verified: every signature, figure and group holds")


def board(
    folders: Annotated[list[Path], typer.Argument(help="campaigns' results folders to add")],
    out: Annotated[Path, typer.Option("--out", help="the board's folder (index.html, proof/)")],
) -> None:
    """Add campaigns' results folders to a static board (DIR/index.html), each verified first."""
    from node.report.board import Refused, build_board
    from protocol import visible

    found = build_board(folders, out)
    if isinstance(found, Refused):
        for problem in found.problems[:SHOWN_PROBLEMS]:
            typer.secho(visible(f"refused: {problem}"), fg=typer.colors.RED, err=True)
        fail(f"error: {found.folder}: not added to the board", 2 if found.unreadable else 1)
    typer.echo(str(found))


def import_(
    tool: Annotated[str, typer.Argument(help="FILE's tool: guidellm, aiperf, vllm or llama-bench")],
    file: Annotated[Path, typer.Argument(help="the tool's own results file (JSON)")],
    board_dir: Annotated[
        Path | None, typer.Option("--board", help="a board's folder: keep the file there and draw it again")
    ] = None,
) -> None:
    """Read another tool's results as rows marked unverified, each naming what the tool measured."""
    from node.report.board import Refused, build_board
    from node.report.imports import keep_import, read_tool
    from protocol import visible
    from scheduler.results.imported import Unreadable

    rows = read_tool(tool, file)
    if isinstance(rows, Unreadable):
        fail(visible(f"error: {file}: not imported: {rows}"), 2)
    for row in rows:
        figures = "; ".join(f"{f.name} = {f.value:.4g} {f.unit}" for f in row.figures)
        requests = f" · {row.requests} requests" if row.requests else ""
        head = f"unverified {row.named} · {row.model} · {row.setting}{requests}"
        typer.echo(visible(f"{head}: {figures}"))
    if board_dir is None:
        return
    kept = keep_import(tool, file, board_dir)
    if isinstance(kept, Unreadable):
        fail(visible(f"error: {file}: not imported: {kept}"), 2)
    found = build_board([], board_dir)
    if isinstance(found, Refused):
        for problem in found.problems[:SHOWN_PROBLEMS]:
            typer.secho(visible(f"refused: {problem}"), fg=typer.colors.RED, err=True)
        fail(f"error: {found.folder}: the board was not drawn", 2 if found.unreadable else 1)
    typer.echo(str(found))


def register(app: typer.Typer) -> None:
    """Add `verify`, `board` and `import` to the CLI."""
    app.command()(verify)
    app.command()(board)
    app.command(name="import")(import_)
