"""report.html's generation part: TTFT/TPOT pictures and the quality table from results.json's records."""

from __future__ import annotations

from drivers.genstats import summarize_generation
from node.submitter.genreport import generation_parts
from protocol import GenerateSpec, Prompt, RequestRecord


def test_generation_sections_from_the_raw_records() -> None:
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
    document = {
        "results": [
            {
                "row": {"DeviceName": "box<1>", "ComputeUnits": "CPU (PyTorch)", "JobId": "c-job-0-0"},
                "signed": {"measurement": {"generation": stats.model_dump(mode="json")}},
            },
            {"row": {"DeviceName": "other"}, "signed": None},
        ]
    }
    page = "".join(generation_parts(document))
    assert '<figure id="generation-latency"' in page
    assert "<svg" in page
    assert "time per output token" in page
    assert "box&lt;1&gt; · CPU (PyTorch) · c-job-0-0" in page
    assert "<td>1.0000</td>" in page  # ROUGE-1 of an exact match
    assert generation_parts({"results": [{"row": {}, "signed": None}]}) == []
