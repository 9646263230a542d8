"""Which rows report.html draws: a figure that stands, and only where there is something to draw.

A refused figure (an outlier of its replicas) is drawn in no picture and the stability table gives
its verdict, not "Complete"; a model server's rows, which have no load time, process memory or second
process, get a line saying so instead of empty axes.
"""

from __future__ import annotations

import re

from kit.reports import REPORTS  # the screenshots' four campaigns

from node.report.render import render_html
from scheduler.results import CampaignReport


def _section(page: str, element_id: str) -> str:
    """The element with this id (a <figure> or a <p>), whole."""
    found = re.search(rf'<(figure|p|div)[^>]* id="{element_id}"[^>]*>.*?</\1>', page, re.S)
    assert found is not None, f"no element {element_id}"
    return found.group(0)


def _stability_row(page: str, label: str) -> str:
    rows = re.findall(r"<tr>(.*?)</tr>", _section(page, "stability-0"), re.S)
    return next(r for r in rows if label in r)


def test_an_outliers_figure_is_drawn_in_no_picture_and_its_verdict_is_in_the_table() -> None:
    report: CampaignReport = REPORTS["verified"]()
    page = render_html(report)
    for picture in ("distributions-0", "processes-0", "resources-0"):
        shown = _section(page, picture)
        assert "b0 · CPU (ONNX)" in shown
        assert "b3 · CPU" not in shown, f"the outlier b3 is drawn in {picture}"
    row = _stability_row(page, "b3 · CPU (ONNX)")
    assert "outlier" in row
    assert "against the agreed" in row
    assert "Complete" not in row


def test_a_model_servers_rows_get_a_line_not_empty_axes() -> None:
    page = render_html(REPORTS["endpoint"]())
    resources, processes = _section(page, "resources-0"), _section(page, "processes-0")
    assert resources.startswith("<p")
    assert "a model server loads its model" in resources
    assert processes.startswith("<p")
    assert "one process" in processes
    assert 'id="generation-latency"' in page  # its requests' times are still drawn


def test_a_tensor_rows_process_medians_are_shown_at_the_figures_decimals() -> None:
    page = render_html(REPORTS["tensor"]())
    assert "12.40; 12.60" in _stability_row(page, "cpu0 · CPU (ONNX)")  # 2 decimals, as the matrix's 12.50
    assert _section(page, "processes-0").startswith("<figure")
