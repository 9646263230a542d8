"""Issue 52, scope 4: `sark-node import TOOL FILE [--board DIR]`, other tools' rows on the board, apart.

The command runs in this process as the CLI registers it, on the tools' own files
(tests/golden/imports/, made by the tools against a loopback server). It prints each row marked
unverified with what the tool measured; with --board it keeps the tool's file byte for byte under the
board and draws the page again, the imported rows in their own table after the verified and single
ones (never counted as verified), each linking its file. The board stays deterministic and
incremental with imports; a file that is no such tool's output exits 2 naming the stage, and the
board is left as it was.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import typer
from kit.bundlelab import grown
from typer.testing import CliRunner, Result

from node.cli.proof import register
from node.report.board import build_board

ROOT = Path(__file__).resolve().parents[4]
GOLDEN = ROOT / "tests" / "golden" / "imports"
GUIDELLM = GOLDEN / "guidellm" / "benchmarks.json"
AIPERF = GOLDEN / "aiperf" / "profile_export_aiperf.json"
LLAMA_BENCH = GOLDEN / "llama-bench" / "llama-bench.json"
VLLM = GOLDEN / "vllm" / "bench_serve.json"


def _sark(*args: str) -> Result:
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return CliRunner().invoke(app, list(args))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_import_prints_the_tools_rows_marked_unverified() -> None:
    result = _sark("import", "guidellm", str(GUIDELLM))
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.splitlines()
    assert line.startswith("unverified guidellm 0.8.1 · sark-loopback · concurrent streams=2 · 6 requests: ")
    assert "time_to_first_token_ms median = " in line
    assert " ms;" in line


def test_the_guides_commands_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/guide/imports.md's commands, from the repository's root, the board under tmp_path."""
    monkeypatch.chdir(ROOT)
    board = tmp_path / "board"
    for command in (
        "sark-node import guidellm tests/golden/imports/guidellm/benchmarks.json",
        "sark-node import aiperf tests/golden/imports/aiperf/profile_export_aiperf.json --board board",
        "sark-node report tests/golden/generate/results.json --format aiperf --out records.jsonl",
    ):
        args = command.split()[1:]
        if "--board" in args:
            args[args.index("--board") + 1] = str(board)
        if args[0] == "report":
            from node.cli.report import register as register_report

            app = typer.Typer()
            app.callback()(lambda: None)
            register_report(app)
            args[-1] = str(tmp_path / "records.jsonl")
            result = CliRunner().invoke(app, args)
        else:
            result = _sark(*args)
        assert result.exit_code == 0, f"{command}: {result.output}"
    assert (board / "index.html").is_file()
    assert (tmp_path / "records.jsonl").read_text() == (GOLDEN / "aiperf" / "sark_export.jsonl").read_text()


def test_imported_rows_sit_apart_from_verified_ones_and_link_the_tools_file(tmp_path: Path) -> None:
    campaign = tmp_path / "c0"
    campaign.mkdir()
    grown(campaign, 4, campaign_id="campaign-imports-0")
    board = tmp_path / "board"
    assert build_board([campaign], board) == board / "index.html"
    before = (board / "index.html").read_text()
    tools = (("guidellm", GUIDELLM), ("aiperf", AIPERF), ("vllm", VLLM), ("llama-bench", LLAMA_BENCH))
    for tool, path in tools:
        result = _sark("import", tool, str(path), "--board", str(board))
        assert result.exit_code == 0, result.output
    text = (board / "index.html").read_text()
    verified = text.count('data-verified="1"')
    assert verified == before.count('data-verified="1"') == 2  # imports are never counted as verified
    assert 'id="imported-rows"' in text
    assert "Imported: another tool's word, not verified (5)" in text
    assert (
        text.index('id="verified-rows"') < text.index('id="single-rows"') < text.index('id="imported-rows"')
    )
    table = text[text.index('id="imported-rows"') :]
    assert "guidellm 0.8.1" in table
    assert "aiperf 0.13.0" in table
    assert "time_to_first_token p50 = " in table
    assert "pp16 threads=2" in table
    assert "median_e2el_ms = " in table
    assert "avg_ts = " in table
    links = [link for link in re.findall(r'href="([^"]+)"', text) if link.startswith("imported/")]
    assert len(links) == 5  # llama-bench's two tests link one file
    for link in links:  # the tool's own file, byte for byte
        kept = board / link
        assert kept.read_bytes() in {path.read_bytes() for _, path in tools}


def test_a_board_with_imports_is_deterministic_and_an_import_is_kept_once(tmp_path: Path) -> None:
    for board in (tmp_path / "a", tmp_path / "b"):
        for tool, path in (
            (("aiperf", AIPERF), ("guidellm", GUIDELLM))
            if board.name == "a"
            else (
                ("guidellm", GUIDELLM),
                ("aiperf", AIPERF),
                ("guidellm", GUIDELLM),
            )
        ):
            assert _sark("import", tool, str(path), "--board", str(board)).exit_code == 0
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")  # any order, any repeat: the same bytes
    assert len(list((tmp_path / "a" / "imported").iterdir())) == 2


def test_a_file_that_is_no_such_tools_output_exits_2_and_leaves_the_board(tmp_path: Path) -> None:
    board = tmp_path / "board"
    assert _sark("import", "guidellm", str(GUIDELLM), "--board", str(board)).exit_code == 0
    before = _tree(board)
    wrong = _sark("import", "aiperf", str(GUIDELLM), "--board", str(board))
    assert wrong.exit_code == 2
    assert "benchmarks.json: reading aiperf's layout: no input_config" in wrong.output
    cut = tmp_path / "cut.json"
    cut.write_bytes(AIPERF.read_bytes()[:100])
    broken = _sark("import", "aiperf", str(cut), "--board", str(board))
    assert broken.exit_code == 2
    assert "cut.json: parsing the JSON: not JSON" in broken.output
    unknown = _sark("import", "vllm-bench", str(GUIDELLM))
    assert unknown.exit_code == 2
    assert "no tool 'vllm-bench'; one of guidellm, aiperf, vllm, llama-bench" in unknown.output
    missing = _sark("import", "aiperf", str(tmp_path / "none.json"))
    assert missing.exit_code == 2
    assert "none.json: reading the file" in missing.output
    assert _tree(board) == before


def test_a_kept_file_damaged_on_the_board_is_named_when_the_board_is_drawn(tmp_path: Path) -> None:
    board = tmp_path / "board"
    assert _sark("import", "aiperf", str(AIPERF), "--board", str(board)).exit_code == 0
    (kept,) = (board / "imported").iterdir()
    shutil.copyfile(GUIDELLM, kept / AIPERF.name)  # another tool's file under aiperf's name
    result = _sark("import", "guidellm", str(GUIDELLM), "--board", str(board))
    assert result.exit_code == 2
    assert f"imported/{kept.name}/{AIPERF.name}: reading aiperf's layout: no input_config" in result.output


def test_a_kept_imports_tool_name_is_only_ever_one_of_the_readers(tmp_path: Path) -> None:
    board = tmp_path / "board"
    assert _sark("import", "vllm", str(VLLM), "--board", str(board)).exit_code == 0
    (kept,) = (board / "imported").iterdir()
    (kept / "tool.txt").write_text("../../proof\n")
    result = _sark("import", "guidellm", str(GUIDELLM), "--board", str(board))
    assert result.exit_code == 2
    cause = "bench_serve.json: choosing the reader: no tool '../../proof'"
    assert f"imported/{kept.name}/{cause}" in result.output
