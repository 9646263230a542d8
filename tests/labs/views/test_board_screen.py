"""Issue 52, scope 3: the board of three campaigns looked at in headless Chromium, from the file system.

The page opens as a `file:` URL with every host unresolvable: its DOM holds the verified rows of all
three campaigns, the console shows no error, and a 1280 px screenshot is a PNG of more than one
colour. Its filters are plain JS: a copy whose last script types a campaign's id into the text filter
hides every other campaign's rows, and one that types a text matching nothing hides them all.
"""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from kit.bundlelab import grown
from kit.chromium import chromium_env
from PIL import Image

from node.report.board import build_board

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    with chromium_env() as env:
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, timeout=120, check=True, env=env
        )


def _filtered(page: Path, text: str) -> Path:
    """A copy of the page whose last script sets the text filter and fires it, as a person would."""
    fill = (
        '<script>const t = document.getElementById("f-text"); t.value = "' + text + '";'
        't.dispatchEvent(new Event("input"));</script></body>'
    )
    copy = page.with_name(f"filtered-{len(text)}.html")
    copy.write_text(page.read_text().replace("</body>", fill))
    return copy


def test_the_board_renders_from_a_file_in_headless_chromium(tmp_path: Path) -> None:
    folders = []
    for i in range(3):
        folders.append(tmp_path / f"c{i}")
        folders[-1].mkdir()
        grown(folders[-1], 4, campaign_id=f"campaign-screen-{i}")
    page = build_board(folders, tmp_path / "board")
    assert isinstance(page, Path)
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    rows = re.findall(r'<tr data-model="[^"]*"[^>]*data-verified="1"(?: hidden="")?>', dom.stdout)
    assert len(rows) == 3 * 2, dom.stdout[-2000:]
    assert 'hidden=""' not in dom.stdout
    for i in range(3):
        assert f"campaign-screen-{i}" in dom.stdout
    problems = re.findall(r".*(?:net::ERR_|Uncaught|Failed to load resource|CONSOLE\(\d+\)).*", dom.stderr)
    assert problems == []
    hidden = _chromium(tmp_path, "--dump-dom", _filtered(page, "no-such-device").as_uri()).stdout
    assert hidden.count('hidden=""') == 3 * 2
    kept = _chromium(tmp_path, "--dump-dom", _filtered(page, "campaign-screen-1").as_uri()).stdout
    assert kept.count('hidden=""') == 2 * 2
    shot = tmp_path / "board.png"
    _chromium(tmp_path, "--window-size=1280,900", f"--screenshot={shot}", page.as_uri())
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("L")
    assert image.size == (1280, 900)
    low, high = image.getextrema()
    assert high - low > 100  # text on a page, not one colour


def test_imported_rows_render_apart_and_the_verified_filter_hides_them(tmp_path: Path) -> None:
    """Issue 52, scope 4: the four tools' own files imported beside a campaign; the page from the file
    system shows them in their own table, and "verified only" hides every one of them."""
    import typer
    from kit.toolfiles import GOLDEN
    from typer.testing import CliRunner

    from node.cli.proof import register

    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)

    campaign = tmp_path / "c0"
    campaign.mkdir()
    grown(campaign, 4, campaign_id="campaign-screen-imports")
    board = tmp_path / "board"
    assert isinstance(build_board([campaign], board), Path)
    for tool, name in (
        ("guidellm", "guidellm/benchmarks.json"),
        ("aiperf", "aiperf/profile_export_aiperf.json"),
        ("vllm", "vllm/bench_serve.json"),
        ("llama-bench", "llama-bench/llama-bench.json"),
    ):
        result = CliRunner().invoke(app, ["import", tool, str(GOLDEN / name), "--board", str(board)])
        assert result.exit_code == 0, result.output
    page = board / "index.html"
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    table = dom[dom.index('id="imported-rows"') :]
    assert len(re.findall(r'<tr data-model="[^"]*"[^>]*data-verified="0"(?: hidden="")?>', table)) == 5
    assert 'hidden=""' not in dom
    checked = page.with_name("verified-only.html")
    tick = (
        '<script>const v = document.getElementById("f-verified"); v.checked = true;'
        'v.dispatchEvent(new Event("input"));</script></body>'
    )
    checked.write_text(page.read_text().replace("</body>", tick))
    only = _chromium(tmp_path, "--dump-dom", checked.as_uri()).stdout
    kept = only[only.index('id="imported-rows"') :]
    assert kept.count('hidden=""') == 5
    assert only[: only.index('id="imported-rows"')].count('data-verified="1" hidden=""') == 0
    shot = tmp_path / "imports.png"
    _chromium(tmp_path, "--window-size=1280,1400", f"--screenshot={shot}", page.as_uri())
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("L")
    assert image.size == (1280, 1400)
    low, high = image.getextrema()
    assert high - low > 100
