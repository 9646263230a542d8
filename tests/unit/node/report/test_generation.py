"""report.html's generation part (TTFT/TPOT pictures, the quality table) and the terminal's generation
table, from the campaign report's records."""

from __future__ import annotations

import re
from pathlib import Path

from kit.data import report_of, signed_part
from rich.console import Console

from node.report.genreport import generation_parts, generation_table, lead_markdown, lead_parts
from node.report.tables import diff_table
from protocol import GenerateSpec, Prompt, RequestRecord
from protocol.genstats import summarize_generation
from scheduler.results import CampaignReport, diff_entries, entries_of


def _document(failed: int = 0, slower: float = 0.0) -> CampaignReport:
    """An LLM report of one measured row (and, with `slower`, a second one that many times slower)."""
    spec = GenerateSpec(
        prompts=(Prompt(id="a", text="x", reference="the cat sat"),),
        prompts_sha256="0" * 64,
        quality=("rouge",),
    )
    record = RequestRecord(
        prompt_id="a",
        prompt_tokens=20,
        output_tokens=3,
        ttft_ms=200.0,
        e2e_ms=300.0,
        token_times_ms=(200.0, 250.0, 300.0),
        output_text="the cat sat",
    )
    broken = record.with_(error="server_error", http_status=500, ttft_ms=None, token_times_ms=())
    stats = summarize_generation([record, *[broken] * failed], 0.3, spec)
    signed = signed_part("box<1>", 300.0, reasons=("TPOT stddev is 40.0% of the mean (>= 10%)",))
    signed["measurement"]["generation"] = stats.model_dump(mode="json")
    row = {
        "DeviceName": "box<1>",
        "ComputeUnits": "CPU (PyTorch)",
        "JobId": "c-job-0-0",
        "Unstable": "False",  # the cells are not read: the verdict is the measurement's
    }
    results = [{"row": row, "signed": signed}, {"row": {"DeviceName": "other"}, "signed": None}]
    if slower:
        late = record.with_(
            ttft_ms=200.0 * slower,
            e2e_ms=300.0 * slower,
            token_times_ms=(200.0 * slower, 250.0 * slower, 300.0 * slower),
        )
        other = summarize_generation([late], 0.3 * slower, spec)
        slow = signed_part("slow", 300.0 * slower)
        slow["measurement"]["generation"] = other.model_dump(mode="json")
        results.append({"row": {**row, "DeviceName": "slow", "JobId": "c-job-1-0"}, "signed": slow})
    return report_of(results)


UNMEASURED = report_of([{"row": {}, "signed": None}])


def test_generation_sections_from_the_raw_records() -> None:
    page = "".join(generation_parts(_document()))
    assert '<figure id="generation-latency"' in page
    assert "<svg" in page
    assert "(E2E - TTFT) / (output tokens - 1)" in page  # the axis names its formula
    assert (
        '<span title="c-job-0-0">box&lt;1&gt; · CPU (PyTorch) · job-0-0</span>' in page
    )  # short, whole in title
    assert "<td>1.0000</td>" in page  # ROUGE-1 of an exact match
    assert generation_parts(UNMEASURED) == []


def _x_ticks(svg: str, axes: int) -> list[float]:
    """The numeric x tick labels of the `axes`-th axes of a matplotlib SVG (svg.fonttype none: text)."""
    part = svg.split('<g id="axes_')[axes]
    x_axis = part.split('<g id="matplotlib.axis_')[1]  # the x axis; the y axis (row labels) follows
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", x_axis)
    return [float(t.replace(",", "")) for t in texts if re.fullmatch(r"[\d.,]+", t)]


def test_ttft_and_tpot_go_on_a_log_axis_when_one_row_is_26x_another() -> None:
    """A row 26x another sat at 0 on a linear axis: across that span both strips are log (plain ticks at
    1, 2 and 5 of a decade, no 0, the slow row's figure and the fast one's both inside); a span of 2x
    stays linear."""
    page = "".join(generation_parts(_document(slower=26.0)))
    svg = page[page.index('<figure id="generation-latency"') :]
    assert "TTFT ms, log, each request" in svg
    assert "TPOT ms, log, each request" in svg
    for axes in (1, 2):
        ticks = _x_ticks(svg, axes)
        assert ticks
        assert 0.0 not in ticks
        assert max(ticks) / min(ticks) >= 10, ticks
        assert all(f"{t:.12g}"[0] in "125" for t in ticks), ticks  # 1, 2, 5 of each decade
    near = "".join(generation_parts(_document(slower=2.0)))
    assert ", log, each request" not in near


def test_the_lead_table_shows_ttft_tpot_itl_decode_and_rouge_with_their_formulas() -> None:
    page = "".join(lead_parts(_document()))
    headers = re.findall(r"<th title=\"([^\"]*)\">", page)
    assert [h.split(" = ")[0] for h in headers[:5]] == [
        "TTFT ms",
        "TPOT ms",
        "ITL ms p99",
        "decode tok/s",
        "ROUGE-L",
    ]
    assert "TPOT ms = (E2E - TTFT) / (output tokens - 1), median" in headers
    # TTFT 200, TPOT (300-200)/2, ITL gaps 50 and 50, decode 2 tokens / 100 ms, ROUGE-L of an exact match
    cells = re.findall(r'<td class="num">([^<]*)</td>', page)
    assert cells[:5] == ["200.0", "50.0", "50.0", "20.0", "1.000"]
    assert "unstable: TPOT stddev is 40.0% of the mean" in page  # the reason, judged on TPOT
    assert lead_parts(UNMEASURED) == []


def test_the_markdown_lead_table_names_each_formula() -> None:
    lines = lead_markdown(_document())
    [head] = [line for line in lines if line.startswith("| device")]
    assert head.split(" | ")[1:6] == ["TTFT ms", "TPOT ms", "ITL ms p99", "decode tok/s", "ROUGE-L"]
    assert "- decode tok/s = (output tokens - 1) / (E2E - TTFT), median" in lines
    assert "- output tok/s = all output tokens / wall time of the run" in lines  # not "tok/s" alone


def test_the_terminal_table_reads_at_80_columns_and_says_why_a_row_is_unstable() -> None:
    table = generation_table(_document())
    assert table is not None
    console = Console(width=80, record=True)
    console.print(table)
    text = console.export_text()
    assert "…" not in text  # nothing cut
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "box<1> · CPU (PyTorch)" in text
    assert "c-job-0-0" not in text  # one run per device and unit: the task id adds nothing
    figures = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 3 and cells[1]:
            figures[cells[1]] = cells[2]
    assert figures["requests"] == "1/1"
    assert [figures[k] for k in ("TTFT ms", "TPOT ms", "ITL ms p99", "decode tok/s", "ROUGE-L")] == [
        "200.0", "50.0", "50.0", "20.0", "1.000",
    ]  # fmt: skip
    assert figures["E2E ms"] == "300.0"
    assert figures["stability"] == "unstable"
    assert "TPOT stddev is 40.0% of the mean" in " ".join(text.split())
    assert generation_table(UNMEASURED) is None


LLM_RESULTS = Path(__file__).resolve().parents[3] / "golden" / "reports" / "llm_results.json"  # a real run


def test_submit_ends_with_the_llm_figures_then_the_matrix_at_80_columns() -> None:
    from node.cli.campaign import end_tables

    console = Console(width=80, record=True)
    console.print(end_tables(CampaignReport.from_json(LLM_RESULTS.read_text())))
    text = console.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.index("TTFT ms") < text.index("end-to-end time per request")  # the LLM table first
    assert "* vm-0 · CPU (PyTorch): " in text  # why the starred cell is unstable


def test_the_diff_of_two_llm_runs_reads_at_80_columns() -> None:
    entries = entries_of(CampaignReport.from_json(LLM_RESULTS.read_text()))
    console = Console(width=80, record=True)
    console.print(diff_table(diff_entries(entries, entries), "A -> B"))
    text = console.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    figures = [
        line.split()[0] for line in text.splitlines() if line.strip().startswith(("TTFT", "TPOT", "ITL"))
    ]
    assert figures[:3] == ["TTFT", "TPOT", "ITL"]


def test_a_partly_failed_run_shows_its_error_share_beside_its_figures_in_every_view() -> None:
    document = _document(failed=3)
    assert "1/4 (75% failed)" in "".join(lead_parts(document))
    assert any("| 1/4 (75% failed) |" in line for line in lead_markdown(document))
    table = generation_table(document)
    assert table is not None
    console = Console(width=120, record=True)
    console.print(table)
    assert "1/4 (75% failed)" in console.export_text()
