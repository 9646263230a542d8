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


def _document(failed: int = 0) -> CampaignReport:
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
    return report_of([{"row": row, "signed": signed}, {"row": {"DeviceName": "other"}, "signed": None}])


UNMEASURED = report_of([{"row": {}, "signed": None}])


def test_generation_sections_from_the_raw_records() -> None:
    page = "".join(generation_parts(_document()))
    assert '<figure id="generation-latency"' in page
    assert "<svg" in page
    assert "(E2E - TTFT) / (output tokens - 1)" in page  # the axis names its formula
    assert "box&lt;1&gt; · CPU (PyTorch) · c-job-0-0" in page
    assert "<td>1.0000</td>" in page  # ROUGE-1 of an exact match
    assert generation_parts(UNMEASURED) == []


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
