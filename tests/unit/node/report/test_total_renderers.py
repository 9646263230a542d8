"""Issue 29: no stored value, however absurd, stops an output.

Every renderer is fed real stored campaigns (`tensor_results.json`: `sark-node submit` of a tensor
campaign with a sustained job on two workers, telemetry and an unschedulable GPU job;
`llm_results.json`: examples/llm.yaml, plus a copy of its generate task made an endpoint task by a
round trip) whose numbers are drawn across the whole float range: infinities, NaN, ±1e308, the
smallest subnormals, negative zero, and anything between. Any number may be drawn: each float in the
signed device and measurement (a value the protocol's own model refuses, such as a negative
timestamp, keeps its stored value: the store only ever holds validated envelopes), each raw sample,
and each number in a row's cells; a drawn share of them (all, half, a tenth) is replaced. Each
renderer must return; report.html must hold, for every figure, either its picture or a note saying
why it is missing.
"""

from __future__ import annotations

import copy
import io
import json
import math
import random
import re
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure
from pydantic import BaseModel, ValidationError
from rich.console import Console

import scheduler as sch
from node.cli.live import task_table
from node.http.shapes import ApiJson, result, task, worker
from node.http.state import Seen
from node.report.costreport import cost_table
from node.report.genreport import generation_table
from node.report.pictures import Picture, drawn, svg_of
from node.report.render import render_html
from node.report.tables import diff_table, matrix_tables, render_markdown
from node.report.telereport import telemetry_parts
from node.report.verifyreport import agreed_table, verification_table
from node.submitter.outputs import write_files
from protocol import ComputeUnit, DeviceProfile, Measurement, ModelRef
from protocol.values import Load
from scheduler.results import CampaignReport, ReportTask, agreed_changes, diff_entries, entries_of

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

HERE: Final = Path(__file__).resolve().parents[3] / "golden" / "reports"
TENSOR: Final = json.loads((HERE / "tensor_results.json").read_text())
LLM: Final = json.loads((HERE / "llm_results.json").read_text())

EDGES: Final = (
    math.inf,
    -math.inf,
    math.nan,
    1e308,
    -1e308,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    -0.0,
    0.0,
)
ABSURD: Final = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True))
FAST: Final = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW: Final = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mixed() -> dict[str, Any]:
    """One document of every kind of task: tensor (telemetry, sustained windows, an unschedulable
    job) and generate (one more copy of the generate task made an endpoint task by a round trip)."""
    document: dict[str, Any] = copy.deepcopy(TENSOR)
    served = copy.deepcopy(LLM["results"][0])
    served["row"]["JobId"] = served["row"]["JobId"].replace("-job-0-", "-job-2-")
    served["signed"]["measurement"]["generation"]["rtt_ms"] = 1.5
    results = copy.deepcopy([*TENSOR["results"][0:5:3], TENSOR["results"][4], *LLM["results"], served])
    for entry in results:  # priced (issue 42): the price and the owner's word are numbers to draw too
        if entry.get("signed"):
            entry["price"] = {"per_hour": 0.5, "source": "owner"}
            entry["signed"]["device"]["price_per_hour"] = 0.5
    document["results"] = results
    document["verification"] = GROUPS  # issue 38: each replica group's figures and a peer's words
    return document


HOSTILE: Final = "[bold red]:skull: <script>x</script> | `=cmd` \x1b[31m\u202e"
GROUPS: Final = [
    {"group": "c-job-0-0", "job_index": 0, "device_class": "cls-1", "model": HOSTILE, "unit": "CPU (ONNX)",
     "outcome": "replicated", "agreed_ms": 10.0, "band": 0.27, "reference": HOSTILE,
     "networks": ["10.0.1.0/24"], "outliers": [HOSTILE], "reason": HOSTILE,
     "replicas": [{"task_id": "c-job-0-0", "peer": HOSTILE, "device": HOSTILE, "figure_ms": 10.0,
                   "network": HOSTILE, "verdict": HOSTILE}, {"task_id": "c-job-0-1"}]},
    {"group": "c-job-1-0", "job_index": 1, "outcome": "unverifiable", "reason": HOSTILE,
     "replicas": [{"task_id": "c-job-1-0", "verdict": "unverifiable"}]},
]  # fmt: skip


MIXED: Final = _mixed()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class Absurd:
    """Where every number of a document comes from: a few drawn floats, spread over the document by a
    random generator seeded from hypothesis's draw (an example shrinks to the values that matter; a
    generator whose every draw hypothesis records, `st.randoms()`, made each example some 1,100 choices
    long and cost two thirds of this file's time, in drawing and in mutating those choices).

    A number keeps its stored value with probability `keep` (0: every number is absurd)."""

    def __init__(self, pool: list[float], rng: random.Random, keep: float) -> None:
        self.pool, self.rng, self.keep = pool, rng, keep

    def float(self, stored: float) -> float:
        return stored if self.rng.random() < self.keep else self.rng.choice(self.pool)

    def cell(self, text: str) -> str:
        """A row cell with each number in it (ProcessMedians holds several, `;`-separated) written as
        rows write numbers."""
        parts = text.split(";")
        if not text or not all(_number(p) for p in parts):
            return text
        shapes = ("{!r}", "{:.3f}", "{:g}", "{:.1f}")
        return ";".join(self.rng.choice(shapes).format(self.float(float(p))) for p in parts)

    def tree(self, value: Any) -> Any:
        """A JSON value with its floats drawn."""
        if isinstance(value, float):
            return self.float(value)
        if isinstance(value, dict):
            return {k: self.tree(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.tree(v) for v in value]
        return value


@st.composite
def absurd(draw: st.DrawFn) -> Absurd:
    pool = draw(st.lists(ABSURD, min_size=1, max_size=6))
    keep = draw(st.sampled_from((0.0, 0.5, 0.9)))
    return Absurd(pool, random.Random(draw(st.integers(0, 2**32 - 1))), keep)


def _restored(drawn: Any, stored: Any, model: type[BaseModel]) -> Any:
    """The drawn value with every field its model refuses set back to the stored value."""
    for _ in range(50):
        try:
            model.model_validate(drawn)
        except ValidationError as exc:
            for error in exc.errors():
                _put(drawn, stored, error["loc"])
            continue
        return drawn
    raise AssertionError("the drawn value never validated")


def _put(drawn: Any, stored: Any, loc: tuple[int | str, ...]) -> None:
    """Set back the stored value at `loc`, or at the deepest part of it the drawn value has (a
    location may name a union's member, which the JSON value has no key for)."""
    reached: tuple[Any, Any, Any] | None = None
    for step in loc:
        in_dict = isinstance(drawn, dict) and step in drawn
        in_list = isinstance(drawn, list) and isinstance(step, int) and step < len(drawn)
        if not (in_dict or in_list):
            break
        reached = (drawn, stored, step)
        drawn, stored = reached[0][step], reached[1][step]
    if reached is not None:
        container, original, key = reached
        container[key] = copy.deepcopy(original[key])


def _absurd(base: dict[str, Any], numbers: Absurd) -> dict[str, Any]:
    """The stored document with its numbers drawn (see the module docstring)."""
    document = copy.deepcopy(base)
    for entry, stored in zip(document["results"], base["results"], strict=True):
        entry["row"] = {k: numbers.cell(v) for k, v in entry["row"].items()}
        entry["samples_ms"] = [numbers.float(x) for x in entry.get("samples_ms", ())]
        if "price" in entry:
            entry["price"] = numbers.tree(entry["price"])
        signed = stored.get("signed")
        if signed:
            for part, model in (("measurement", Measurement), ("device", DeviceProfile)):
                drawn = numbers.tree(copy.deepcopy(signed[part]))
                entry["signed"][part] = _restored(drawn, signed[part], model)
    document["verification"] = numbers.tree(copy.deepcopy(base.get("verification", [])))
    return document


def _report(document: dict[str, Any]) -> CampaignReport:
    """The drawn document as a report, read as `report PATH` reads a results.json."""
    return CampaignReport.model_validate(document)


def _text(*renderables: Any) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True)
    for renderable in renderables:
        console.print(renderable)
    return buffer.getvalue()


def _figures_whole(page: str) -> None:
    """Every figure holds its picture or a note naming the picture and the error; none is empty."""
    figures = re.findall(r"<figure id=\"[^\"]+\" class=\"([^\"]+)\">(.*?)</figure>", page, re.S)
    assert figures
    for css, inner in figures:
        if "not-drawn" in css:
            assert re.search(r'<p class="note">[^<]+: not drawn \(\w+', inner), inner
        else:
            assert inner.startswith("<svg"), inner[:200]


SECTIONS: Final = {
    *(f"{part}-{k}" for part in ("distributions", "resources", "processes") for k in (0, 1)),
    "heatmap-1",
    "generation-latency",
    "endpoint-levels",
    "telemetry-0",
    "telemetry-1",
}


@given(absurd())
@SLOW
def test_every_file_is_written_and_every_figure_is_drawn_or_named(numbers: Absurd) -> None:
    document = _absurd(MIXED, numbers)
    with tempfile.TemporaryDirectory() as folder:
        files = write_files(Path(folder), _report(document))
        assert [files[k].name for k in ("csv", "json", "html")] == [
            "results.csv",
            "results.json",
            "report.html",
        ]
        page = files["html"].read_text()
        written = json.loads(files["json"].read_text())
    assert 'id="not-rendered"' not in page  # the page itself was built: only pictures may be missing
    _figures_whole(page)
    assert 'id="cost"' in page  # performance per dollar and per watt, whatever the prices drawn
    assert '<div id="verification"><table>' in page  # one agreed figure per class, whatever was drawn
    placed = set(re.findall(r'<(?:figure|p class="muted") id="([^"]+)"', page))
    assert placed >= SECTIONS  # every picture is drawn, named as not drawn, or a line says why there is none
    assert written["campaign_id"] == document["campaign_id"]


@given(absurd())
@SLOW
def test_a_timeline_of_absurd_telemetry_is_drawn_or_named(numbers: Absurd) -> None:
    document = _absurd({**TENSOR, "results": TENSOR["results"][3:4]}, numbers)
    page = "".join(telemetry_parts(_report(document)))
    _figures_whole(page)
    assert page.count('class="telemetry') == 1


def test_absurd_telemetry_today_is_a_caption_and_a_picture_that_fails_is_a_note() -> None:
    """The issue's values (±1e308 W, °C, MHz alternating) are left out of the lines and counted; a
    picture whose drawing raises all the same (those values drawn as they are: matplotlib cannot lay
    out an axis 2e308 wide) is a note naming the picture and the error."""
    entry = copy.deepcopy(TENSOR["results"][3])
    points = entry["signed"]["measurement"]["telemetry"]["points"]
    for k, point in enumerate(points):
        big = 1e308 if k % 2 else -1e308
        point.update(cpu_mhz=[big for _ in point["cpu_mhz"]], temp_c=big, gpu_power_w=big, gpu_sm_mhz=big)
    page = "".join(telemetry_parts(_report({**TENSOR, "results": [entry]})))
    assert "<svg" in page
    shown = re.search(
        r"<figcaption>(\d+) readings not drawn: not finite or beyond ±1e\+15</figcaption>", page
    )
    assert shown is not None
    assert int(shown[1]) == 4 * len(points)

    def unguarded() -> Picture:
        figure = Figure()
        figure.add_subplot().plot([p["t_ms"] for p in points], [p["temp_c"] for p in points])
        return Picture(svg_of(figure, "x"))

    page = drawn("telemetry of <vm-0>", unguarded, element_id="telemetry-0", css_class="telemetry")
    note = re.fullmatch(
        r'<figure id="telemetry-0" class="telemetry not-drawn"><p class="note">(.+)</p></figure>', page
    )
    assert note is not None, page[:300]
    assert re.fullmatch(r"telemetry of &lt;vm-0&gt;: not drawn \(\w+(Error|Warning): .+\)", note[1])


def test_a_page_that_cannot_be_built_says_why() -> None:
    broken = ReportTask.model_construct(row=None)  # type: ignore[arg-type]  # only a bug builds this
    page = render_html(_report({**TENSOR, "results": []}).model_copy(update={"results": (broken,)}))
    assert '<p class="note" id="not-rendered">the report: not drawn (AttributeError: ' in page
    assert "results.csv and results.json beside this file hold every result" in page


@given(absurd())
@FAST
def test_csv_json_markdown_and_the_terminal_tables_return(numbers: Absurd) -> None:
    report = _report(_absurd(MIXED, numbers))
    assert sch.to_csv(task.row for task in report.results).startswith("Status,")
    assert CampaignReport.from_json(report.to_json()).campaign_id == report.campaign_id
    assert render_markdown(report).startswith("# ")
    entries = entries_of(report)
    assert _text(*matrix_tables(entries), generation_table(report), cost_table(report, "per_1k_inferences"))
    assert "## Verification" in render_markdown(report)
    assert "verification" in _text(verification_table(report))


@given(absurd())
@FAST
def test_a_diff_against_absurd_values_returns(numbers: Absurd) -> None:
    document = _absurd(MIXED, numbers)
    before, after = entries_of(_report(MIXED)), entries_of(_report(document))
    for a, b in ((before, after), (after, before), (after, after)):
        rows = diff_entries(a, b, rank="per_m_tokens")
        assert rows
        assert _text(diff_table(rows, "A -> B"))
        json.dumps([r.model_dump(mode="json") for r in rows])
    mine, theirs = _report(MIXED).verification, _report(document).verification
    for x, y in ((mine, theirs), (theirs, mine), (theirs, ())):
        changes = agreed_changes(x, y)
        assert _text(agreed_table(changes))
        json.dumps([c.model_dump(mode="json") for c in changes])


def _strict(response: ApiJson) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(bytes(response.body), parse_constant=refuse)


@given(absurd())
@FAST
def test_the_live_view_and_the_dashboards_json_return(numbers: Absurd) -> None:
    document = _absurd(MIXED, numbers)
    model = ModelRef(name="m.onnx", sha256="a" * 64, size=1)
    views = [
        sch.TaskView(
            task_id=entry["row"]["JobId"] or f"c-job-{k}-0",
            job_index=k,
            unit=ComputeUnit.CPU_ONNX,
            model=model,
            state=sch.TaskState.LEASED,
            device_name=entry["row"]["DeviceName"],
            progress=sch.TaskProgress(done=1, total=2, median_ms=numbers.float(1.0)),
        )
        for k, entry in enumerate(document["results"])
    ]
    assert _text(task_table(views))
    for part, view in zip(_report(document).results, views, strict=True):
        shown = _strict(ApiJson({"result": result(part), "task": task(view)}))
        assert shown["result"]["row"] == part.row
    groups = [g.model_dump(mode="json") for g in _report(document).verification]  # GET /api/campaigns'
    assert len(_strict(ApiJson({"verification": groups}))["verification"]) == len(GROUPS)
    signed = document["results"][0]["signed"]
    profile = DeviceProfile.model_validate(signed["device"])
    busy = numbers.float(0.5)
    load = Load(running=1, cpu_busy=busy if busy >= 0 else 0.5)  # NaN and negatives are no Load
    peer = sch.PeerView(peer_id="12D3KooWpeer", profile=profile, load=load)
    shown = _strict(ApiJson(worker(Seen(peer, (), 1.7e9), 1.7e9, 30.0)))
    assert shown["load"]["cpu_busy"] == (load.cpu_busy if math.isfinite(load.cpu_busy) else None)
