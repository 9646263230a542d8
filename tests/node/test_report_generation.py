"""report.html's generation part (TTFT/TPOT pictures, the quality table) and the terminal's generation
table, from results.json's records."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from node.submitter.genreport import generation_parts, generation_table
from protocol import GenerateSpec, Prompt, RequestRecord
from protocol.genstats import summarize_generation


def _document() -> dict[str, Any]:
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
    stats = summarize_generation([record], 0.3, spec)
    return {
        "results": [
            {
                "row": {"DeviceName": "box<1>", "ComputeUnits": "CPU (PyTorch)", "JobId": "c-job-0-0"},
                "signed": {"measurement": {"generation": stats.model_dump(mode="json")}},
            },
            {"row": {"DeviceName": "other"}, "signed": None},
        ]
    }


def test_generation_sections_from_the_raw_records() -> None:
    page = "".join(generation_parts(_document()))
    assert '<figure id="generation-latency"' in page
    assert "<svg" in page
    assert "time per output token" in page
    assert "box&lt;1&gt; · CPU (PyTorch) · c-job-0-0" in page
    assert "<td>1.0000</td>" in page  # ROUGE-1 of an exact match
    assert generation_parts({"results": [{"row": {}, "signed": None}]}) == []


def test_the_terminal_table_shows_ttft_tpot_throughput_and_quality() -> None:
    table = generation_table(_document())
    assert table is not None
    console = Console(width=160, record=True)
    console.print(table)
    text = console.export_text()
    assert "box<1> · CPU (PyTorch)" in text
    assert "c-job-0-0" not in text  # one run per device and unit: the task id adds nothing
    [row] = [line for line in text.splitlines() if "box<1>" in line]
    cells = [c.strip() for c in row.split("│") if c.strip()]
    # requests, TTFT, its p90, TPOT (300-200)/2, ITL p99, E2E, decode tok/s (2 / 100 ms), tokens, ROUGE-L
    assert cells[1:] == ["1/1", "200.0", "200.0", "50.0", "50.0", "300", "20.0", "3.0", "1.000"]
    assert generation_table({"results": [{"row": {}, "signed": None}]}) is None
