"""The LLM figures every view leads with, their per-request values, the diff that tests each of them, and
a generation's stability verdict judged on TPOT rather than on end-to-end times."""

from __future__ import annotations

from protocol import GenerateSpec, GenerationStats, Prompt, RequestRecord
from protocol.aggregate import per_token_instability
from protocol.genstats import summarize_generation
from scheduler.results import LLM_FIGURES, ReportEntry, diff_entries, headline, per_request

SPEC = GenerateSpec(
    prompts=(Prompt(id="a", text="x", reference="the cat sat on the mat"),),
    prompts_sha256="0" * 64,
    quality=("rouge",),
)


def _record(ttft: float, tpot: float, tokens: int, text: str = "the cat sat on the mat") -> RequestRecord:
    times = tuple(ttft + tpot * k for k in range(tokens))
    return RequestRecord(
        prompt_id="a",
        prompt_tokens=100,
        output_tokens=tokens,
        ttft_ms=ttft,
        e2e_ms=times[-1],
        token_times_ms=times,
        output_text=text,
    )


def _stats(tpot: float, *, lengths: tuple[int, ...] = (8, 30, 12, 60, 20, 45, 10, 25)) -> GenerationStats:
    """Answers of very different lengths (end-to-end times from 0.5 to 3.2 s) at one steady TPOT."""
    return summarize_generation([_record(200.0, tpot, n) for n in lengths], 10.0, SPEC)


def _entry(stats: GenerationStats) -> ReportEntry:
    return ReportEntry(
        task_id="c-job-0-0",
        job_index=0,
        status="Complete",
        model="SmolLM2.gguf",
        unit="CPU (PyTorch)",
        device="vm-0",
        median_ms=stats.e2e_ms.median,
        samples_ms=tuple(r.e2e_ms for r in stats.records),
        generation=stats,
    )


def test_the_figures_and_their_per_request_values() -> None:
    stats = _stats(50.0)
    assert [f.label for f in LLM_FIGURES] == ["TTFT ms", "TPOT ms", "ITL ms p99", "decode tok/s", "ROUGE-L"]
    assert [f.titled for f in LLM_FIGURES][1] == "TPOT ms = (E2E - TTFT) / (output tokens - 1), median"
    values = {f.key: headline(stats, f) for f in LLM_FIGURES}
    assert values == {"ttft": 200.0, "tpot": 50.0, "itl": 50.0, "decode": 20.0, "rouge_l": 1.0}
    assert per_request(stats, LLM_FIGURES[3]) == (20.0,) * 8  # decode tok/s of each request
    assert len(per_request(stats, LLM_FIGURES[2])) == sum(n - 1 for n in (8, 30, 12, 60, 20, 45, 10, 25))
    assert per_request(stats, LLM_FIGURES[4]) == ()  # one score per run: nothing to test


def test_outputs_of_different_lengths_do_not_make_a_generation_unstable() -> None:
    stats = _stats(50.0)
    assert stats.e2e_ms.cv > 0.5  # end to end, this run looks wildly unstable ...
    assert per_token_instability(stats, [8], background_cores=0.0) == ()  # ... per token it is steady


def test_a_generation_whose_tpot_varies_is_unstable_and_says_so() -> None:
    records = [_record(200.0, tpot, 20) for tpot in (40.0, 90.0, 45.0, 120.0, 50.0, 42.0)]
    stats = summarize_generation(records, 10.0, SPEC)
    reasons = per_token_instability(stats, [3, 3], background_cores=0.0)
    assert reasons
    assert all(r.startswith("TPOT ") for r in reasons)
    assert any("process medians" in r for r in reasons)  # per-process TPOT medians 45 vs 50: 10.5 % apart


def test_the_diff_of_two_llm_runs_leads_with_their_figures() -> None:
    before, after = _entry(_stats(50.0)), _entry(_stats(100.0))
    rows = diff_entries([before], [after])
    assert [r.metric for r in rows] == [
        "TTFT ms",
        "TPOT ms",
        "ITL ms p99",
        "decode tok/s",
        "ROUGE-L",
        "E2E ms",
    ]
    by = {r.metric: r for r in rows}
    assert by["TPOT ms"].regression  # slower per token
    assert by["TPOT ms"].change_pct == 100.0
    assert by["decode tok/s"].regression  # fewer tokens a second is worse: its change is negative
    assert by["decode tok/s"].change_pct == -50.0
    assert by["TTFT ms"].verdict == "no significant change"
    assert by["ROUGE-L"].p_value is None  # one mean score a side: shown, not tested
    assert not by["E2E ms"].significant  # lengths differ so much that end-to-end times hide it


def test_a_tensor_diff_keeps_its_one_latency_row() -> None:
    entry = _entry(_stats(50.0)).with_(generation=None)
    [row] = diff_entries([entry], [entry])
    assert row.metric == "latency ms"


def test_a_run_with_no_successful_request_leads_with_no_figure_rather_than_zero() -> None:
    failed = _record(200.0, 20.0, 3).with_(error="server_error", http_status=500)
    stats = summarize_generation([failed, failed], 1.0, SPEC)
    assert stats.requests == stats.errors == 2
    assert {f.key: headline(stats, f) for f in LLM_FIGURES if f.key != "rouge_l"} == {
        f.key: None for f in LLM_FIGURES if f.key != "rouge_l"
    }
    ok = summarize_generation([_record(200.0, 20.0, 3), failed], 1.0, SPEC)
    assert all(headline(ok, f) is not None for f in LLM_FIGURES)
