"""report.html looked at as a person does (issue 42, scope 4): headless Chromium at 1280 px renders the
report of a tensor, an LLM, a model-server (endpoint) and a verified campaign, takes a screenshot of
the whole page and prints it to PDF; and the roofline (issue 53) of the packaged models, counted in the
cost child, drawn against one device's peaks and said missing for a device without them.

A page fails when it is empty or broken: no title, little text, no matrix table, a picture neither
drawn nor named, the "not rendered" note, a console error, anything wider than the window (at 1280 px
nothing scrolls sideways), a screenshot of almost one colour, or a print that is no PDF. The last test
feeds the same checks a page that could not be built, so they are seen to fail. With `SARK_SHOTS=DIR`
the screenshots are also written to DIR (`tensor.png`, `llm.png`, `endpoint.png`, `verified.png`,
`roofline.png`: the roofline section alone).
"""

from __future__ import annotations

import base64
import io
import json
import os
from itertools import combinations
from pathlib import Path
from typing import Any, Final

import pytest
from kit.reports import LLM_RESULTS, REPORTS, ROOF_MODELS, roofline_report
from PIL import Image

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.report.render import render_html
from scheduler.results import CampaignReport, ReportTask

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

WIDTH: Final = 1280
LOOK = """
(() => {
  const wide = [...document.querySelectorAll("body *")]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
    .map(e => e.tagName + (e.id ? "#" + e.id : ""));
  const heat = document.getElementById("heatmap-0"), table = document.getElementById("matrix-0");
  const [h, t] = [heat, table].map(e => e && e.getBoundingClientRect());
  return JSON.stringify({
    beside: h && t ? h.left >= t.right - 1 && h.top < t.bottom : null,
    title: (document.querySelector("h1") || {}).textContent || "",
    text: document.body.innerText.length,
    tables: document.querySelectorAll("table").length,
    pictures: document.querySelectorAll("figure svg").length,
    figures: document.querySelectorAll("figure").length,
    named: document.querySelectorAll("figure p.note").length,
    unrendered: !!document.getElementById("not-rendered"),
    scroll: document.documentElement.scrollWidth,
    wide: wide.slice(0, 5),
  });
})()
"""


BESIDE: Final = frozenset({"tensor", "verified"})
"""The reports whose heatmap fits beside its matrix at 1280 px (a narrow matrix: one or two units)."""


def _problems(seen: dict[str, Any], png: bytes, pdf: bytes) -> list[str]:
    """What makes a page empty, broken or unreadable at 1280 px (empty: none)."""
    found = []
    if not seen["title"].startswith("sark-node report: "):
        found.append(f"no report title: {seen['title']!r}")
    if seen["unrendered"]:
        found.append("the page says it could not be built")
    if seen["text"] < 400 or seen["tables"] < 1:
        found.append(f"next to nothing shown: {seen['text']} characters, {seen['tables']} tables")
    if seen["pictures"] + seen["named"] < seen["figures"]:
        found.append("a picture neither drawn nor named")
    if seen["scroll"] > WIDTH or seen["wide"]:
        found.append(f"wider than {WIDTH} px: {seen['scroll']} px, {seen['wide']}")
    image = Image.open(io.BytesIO(png)).convert("L")
    colours = image.getcolors(maxcolors=1 << 16)
    if colours is not None and len(colours) < 16:
        found.append(f"the screenshot is almost one colour ({len(colours)} grey levels)")
    if not pdf.startswith(b"%PDF") or len(pdf) < 4096:
        found.append(f"no printable PDF ({len(pdf)} bytes)")
    return found


async def _look(page: Cdp, path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """The page at `path` at 1280 px: what it shows, a screenshot of all of it, and its print."""
    await page.send(
        "Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False
    )
    await page.open(path.as_uri(), 60)
    seen = json.loads(await page.evaluate(LOOK))
    size = (await page.send("Page.getLayoutMetrics"))["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(size["height"], 12_000), "scale": 1}
    shot = await page.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
    printed = await page.send("Page.printToPDF", printBackground=True)
    return seen, base64.b64decode(shot["data"]), base64.b64decode(printed["data"])


@pytest.mark.parametrize("name", sorted(REPORTS))
async def test_report_html_reads_at_1280_px_and_prints(page: Cdp, tmp_path: Path, name: str) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(REPORTS[name]()))
    seen, png, pdf = await _look(page, path)
    shots = os.environ.get("SARK_SHOTS")
    for folder in [tmp_path, *([Path(shots)] if shots else [])]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(png)
    assert _problems(seen, png, pdf) == []
    assert page.problems == []
    if name in BESIDE:
        assert seen["beside"], "the heatmap is not beside its table on a 1280 px page"


async def test_the_checks_see_a_page_that_could_not_be_built(page: Cdp, tmp_path: Path) -> None:
    broken = ReportTask.model_construct(row=None)  # type: ignore[arg-type]  # only a bug builds this
    report = CampaignReport.from_json(LLM_RESULTS.read_text()).model_copy(update={"results": (broken,)})
    path = tmp_path / "report.html"
    path.write_text(render_html(report))
    seen, png, pdf = await _look(page, path)
    found = _problems(seen, png, pdf)
    assert "the page says it could not be built" in found
    assert any(p.startswith("next to nothing shown") for p in found)


ROOFLINE = """
(() => {
  const figure = document.getElementById("roofline-0"), svg = figure && figure.querySelector("svg");
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const words = svg ? [...svg.querySelectorAll("text")].map(t => [t.textContent, box(t)]) : [];
  return JSON.stringify({
    drawn: !!svg,
    box: figure ? box(figure) : null,
    words: words,
    missing: (document.getElementById("roofline-1") || {}).textContent || "",
  });
})()
"""


def _overlaps(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


async def test_the_roofline_reads_at_1280_px(page: Cdp, tmp_path: Path) -> None:
    report, costs = roofline_report()
    path = tmp_path / "report.html"
    path.write_text(render_html(report, costs=costs))
    seen, png, pdf = await _look(page, path)
    assert _problems(seen, png, pdf) == []
    assert page.problems == []
    roof = json.loads(await page.evaluate(ROOFLINE))
    assert roof["drawn"], "no roofline picture for cpu0"
    assert roof["missing"].startswith("No roof drawn for cpu1: no measured peaks")
    left, top, right, bottom = roof["box"]
    assert right <= WIDTH
    labels = [(text, b) for text, b in roof["words"] if text.endswith("· CPU (ONNX)")]
    assert sorted(text for text, _ in labels) == sorted(f"{m}.onnx · CPU (ONNX)" for m in ROOF_MODELS[:-1])
    for _, b in labels:  # every label inside the picture, none over another
        assert left <= b[0] <= b[2] <= right
        assert top <= b[1] <= b[3] <= bottom
    assert [(a, b) for (a, x), (b, y) in combinations(labels, 2) if _overlaps(x, y)] == []
    assert [text for text, _ in roof["words"] if "$" in text or "\\" in text] == []  # no raw mathtext ticks
    shot = Image.open(io.BytesIO(png)).crop((int(left), int(top), int(right), int(bottom)))
    colours = shot.convert("L").getcolors(maxcolors=1 << 16)  # None: more than that many
    assert colours is None or len(colours) >= 16, "the roofline's screenshot is blank"
    shots = os.environ.get("SARK_SHOTS")
    for folder in [tmp_path, *([Path(shots)] if shots else [])]:
        folder.mkdir(parents=True, exist_ok=True)
        shot.save(folder / "roofline.png")
