"""Issue 52, scope 3: `sark-node board` from three campaigns' bundles.

The three are the golden bundle's real results signed again for campaigns of their own
(`kit.bundlelab.grown`). The board is built, rebuilt byte for byte the same, built again in the other
order (the same bytes), grown by one more campaign (incremental: the ones before stay), and every
link of its page resolves to a file under the board. A tampered bundle is not added (exit 1 at the
command) and a folder with no bundle exits 2; either leaves the board as it was.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from kit.bundlelab import grown

from node.report.board import Refused, build_board


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("campaigns")
    folders = []
    for i, rows in enumerate((4, 6, 8)):
        folder = root / f"c{i}"
        folder.mkdir()
        grown(folder, rows, campaign_id=f"campaign-board-{i}")
        folders.append(folder)
    return folders


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_board_of_three_campaigns_is_deterministic_and_its_links_resolve(
    campaigns: list[Path], tmp_path: Path
) -> None:
    page = build_board(campaigns, tmp_path / "a")
    assert page == tmp_path / "a" / "index.html"
    text = page.read_text()
    assert text.count('data-verified="1"') == 2 + 3 + 4  # each campaign's groups, once each
    assert 'data-verified="0"' not in text
    links = re.findall(r'href="([^"]+)"', text)
    assert len(links) == 9 * 2 + 3  # results.json and bundle.json a row (no report.html), a campaign
    for link in links:
        assert not link.startswith(("http:", "https:", "/")), link
        assert (page.parent / link).is_file(), link
    assert "<script src" not in text  # nothing fetched: it opens from a file
    assert "<link" not in text
    first = _tree(tmp_path / "a")
    assert build_board(campaigns, tmp_path / "a") == page
    assert _tree(tmp_path / "a") == first  # rebuilt: byte for byte
    assert build_board(list(reversed(campaigns)), tmp_path / "b") == tmp_path / "b" / "index.html"
    assert _tree(tmp_path / "b") == first  # the same bundles in another order


def test_the_board_grows_one_campaign_at_a_time(campaigns: list[Path], tmp_path: Path) -> None:
    build_board(campaigns[:2], tmp_path / "board")
    assert "campaign-board-2" not in (tmp_path / "board" / "index.html").read_text()
    build_board(campaigns[2:], tmp_path / "board")
    whole = build_board(campaigns, tmp_path / "all")
    assert isinstance(whole, Path)
    assert _tree(tmp_path / "board") == _tree(tmp_path / "all")


def test_a_tampered_bundle_is_not_added_and_the_board_stays(campaigns: list[Path], tmp_path: Path) -> None:
    build_board(campaigns[:1], tmp_path / "board")
    before = _tree(tmp_path / "board")
    bad = tmp_path / "bad"
    shutil.copytree(campaigns[1], bad)
    results = json.loads((bad / "results.json").read_text())
    results["results"][0]["row"]["InferenceMsMedian"] = "0.001"
    (bad / "results.json").write_text(json.dumps(results, indent=1))
    refused = build_board([bad], tmp_path / "board")
    assert isinstance(refused, Refused)
    assert not refused.unreadable
    assert any("row.InferenceMsMedian" in p for p in refused.problems), refused.problems
    (bad / "bundle.json").unlink()
    refused = build_board([bad], tmp_path / "board")
    assert isinstance(refused, Refused)
    assert refused.unreadable
    assert _tree(tmp_path / "board") == before
