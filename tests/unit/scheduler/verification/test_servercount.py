"""Issue 50: a load's count held to the server's own counters, read by the submitter itself.

The pages are real servers' text: llama.cpp's as its server (xllamacpp 2026.10.11549, `endpoint_metrics`)
wrote it after three chat requests of 4 tokens each (tests/labs/e2e/test_server_count.py reads the live
one); vLLM's as prometheus_client 0.26 writes its counters (vLLM's metrics are prometheus_client
`Counter`s named `vllm:request_success` and `vllm:generation_tokens`, docs.vllm.ai "Production Metrics";
written out here: sark-node's processes leave prometheus_client out, node/p2p/trim.py); SGLang's
from its docs (docs/references/production_metrics.md, sgl-project/sglang). The parser reads untrusted
text: every limit and malformed page is a `CountRead` with its reason, never an exception.
"""

from __future__ import annotations

import pytest
from kit.loads import load_measurement

from protocol import GenerateSpec, Measurement, Prompt, RequestRecord
from protocol.genstats import summarize_generation
from scheduler.verification.servercount import (
    MAX_METRICS_BYTES,
    MAX_METRICS_LINES,
    Claimed,
    CountRead,
    ServerCount,
    claimed,
    count_problems,
    count_rise,
    parse_counters,
    slack_for,
)

LLAMACPP = b"""# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 36
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 42
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.403712
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 12
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 16
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""
SGLANG = b"""# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
"""


def _vllm_page(stop: int, length: int, tokens: int) -> bytes:
    """vLLM's counters as prometheus_client 0.26 writes them (its `generate_latest`, with the `_created`
    gauges it adds beside each counter)."""
    return f"""# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{finished_reason="stop",model_name="m"}} {stop:.1f}
vllm:request_success_total{{finished_reason="length",model_name="m"}} {length:.1f}
# HELP vllm:request_success_created Count of successfully processed requests.
# TYPE vllm:request_success_created gauge
vllm:request_success_created{{finished_reason="stop",model_name="m"}} 1.7957226788532367e+09
vllm:request_success_created{{finished_reason="length",model_name="m"}} 1.7957226788532512e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} {tokens:.1f}
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{{model_name="m"}} 1.7957226788532698e+09
""".encode()


def test_llamacpps_page_gives_generated_and_prompt_tokens_no_requests() -> None:
    read = parse_counters(LLAMACPP)
    assert read.error == ""
    assert read.values == {
        "generation_tokens": (12.0, "llamacpp:tokens_predicted_total"),
        # processed excludes cached: only the two together bound a record's prompt tokens (3 x 26)
        "prompt_tokens": (78.0, "llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total"),
    }


def test_vllms_page_sums_every_finish_reason_and_skips_the_created_gauges() -> None:
    read = parse_counters(_vllm_page(3, 4, 28))
    assert read.values == {
        "requests": (7.0, "vllm:request_success_total"),
        "generation_tokens": (28.0, "vllm:generation_tokens_total"),
    }


def test_sglangs_page_gives_requests_and_generated_tokens_not_its_prompt_counter() -> None:
    read = parse_counters(SGLANG)
    assert read.values == {
        "requests": (4.0, "sglang:num_requests_total"),
        "generation_tokens": (7557572.0, "sglang:generation_tokens_total"),
    }  # whether its prompt counter counts a cached prefix differs between versions: not a bound


def test_a_counter_without_its_cached_half_gives_no_prompt_bound() -> None:
    page = LLAMACPP.replace(b"llamacpp:prompt_tokens_cached_total 42\n", b"")
    assert "prompt_tokens" not in parse_counters(page).values


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        (b"x" * (MAX_METRICS_BYTES + 1), f"the metrics page passed {MAX_METRICS_BYTES} bytes"),
        (b"\n" * MAX_METRICS_LINES, f"the metrics page has more than {MAX_METRICS_LINES} lines"),
        (b"# TYPE a counter\n\xff\xfe\n", "the metrics page is not UTF-8 (invalid start byte at byte 17)"),
        (
            b"# TYPE llamacpp:tokens_predicted_total gauge\nllamacpp:tokens_predicted_total 5\n",
            "line 2: llamacpp:tokens_predicted_total is declared gauge, not a counter",
        ),
        (
            b"llamacpp:tokens_predicted_total 5\n",
            "line 1: llamacpp:tokens_predicted_total is declared without a TYPE, not a counter",
        ),
        (
            b"# TYPE tgi_request_success counter\ntgi_request_success five\n",
            "line 2: tgi_request_success's value 'five' is not a number",
        ),
        (
            b"# TYPE tgi_request_success counter\ntgi_request_success NaN\n",
            "line 2: tgi_request_success's value nan is no counter's",
        ),
        (
            b"# TYPE tgi_request_success counter\ntgi_request_success -1\n",
            "line 2: tgi_request_success's value -1.0 is no counter's",
        ),
        (b"<html>not metrics</html>", "the metrics page has none of the counters this submitter reads"),
    ],
)
def test_an_untrusted_page_that_is_no_counter_page_is_a_reason(page: bytes, reason: str) -> None:
    assert parse_counters(page) == CountRead(error=reason)


def test_a_rise_is_the_difference_and_a_fall_or_a_failed_read_is_none() -> None:
    before, after = parse_counters(_vllm_page(3, 4, 28)), parse_counters(_vllm_page(30, 4, 300))
    rise = count_rise(before, after, "http://s/metrics")
    assert isinstance(rise, ServerCount)
    assert rise.rises == {"requests": 27.0, "generation_tokens": 272.0}
    assert count_rise(after, before, "u") == (
        "vllm:request_success_total fell from 34 to 7 between the reads (the server restarted)"
    )
    assert count_rise(before, CountRead(error="GET u: HTTP 404 ''"), "u") == "GET u: HTTP 404 ''"


SPEC = GenerateSpec(prompts=(Prompt(id="a", text="Say OK."),), prompts_sha256="0" * 64, max_new_tokens=4)


def _records(n: int, *, counted: bool = False, failed: int = 0) -> Measurement:
    ok = [
        RequestRecord(
            prompt_id="a", prompt_tokens=26, output_tokens=4, ttft_ms=50.0, e2e_ms=80.0,
            token_times_ms=(50.0, 60.0, 70.0, 80.0), started_s=i * 0.1, tokens_counted=counted,
        )
        for i in range(n)
    ]  # fmt: skip
    bad = [r.with_(error="http_status", output_tokens=0) for r in ok[:failed]]
    stats = summarize_generation([*ok, *bad], n * 0.1, SPEC)
    return load_measurement(stats)


def test_the_claims_are_the_successful_records_and_a_client_count_is_one_token() -> None:
    assert claimed(_records(10, failed=3)) == Claimed(10, 40, 260)
    assert claimed(_records(10, counted=True)) == Claimed(10, 10, 260)
    assert slack_for(SPEC, 2) == Claimed(2, 8, 0)


LLAMA_RISE = ServerCount(
    {"generation_tokens": 125.0, "prompt_tokens": 820.0},
    {"generation_tokens": "llamacpp:tokens_predicted_total", "prompt_tokens": "llamacpp:prompt_tokens_total"},
    "http://127.0.0.1:8/metrics",
)


def test_a_count_within_the_servers_rise_passes_and_one_past_it_is_named() -> None:
    slack = Claimed(2, 8, 0)
    honest = claimed(_records(30))  # 120 tokens, the server counted 125 (its five probe tokens)
    assert list(count_problems(honest, LLAMA_RISE, slack)) == []
    padded = claimed(_records(40))  # 160 tokens: 10 requests the server never answered
    [problem] = count_problems(padded, LLAMA_RISE, slack)
    assert problem == (
        "generation.records[].output_tokens (summed): 160, more than the server counted: "
        "llamacpp:tokens_predicted_total rose by 125 between this submitter's reads of "
        "http://127.0.0.1:8/metrics (plus a slack of 8 for requests the server had not counted yet)"
    )
    assert list(count_problems(padded, None, slack)) == []  # no count: the floor alone


def test_a_fleet_member_is_held_with_the_members_accepted_before_it() -> None:
    slack = Claimed(4, 16, 0)
    member = claimed(_records(20))  # 80 tokens, alone within the rise
    assert list(count_problems(member, LLAMA_RISE, slack, Claimed(), "fleet member 1 of 2")) == []
    [problem] = count_problems(member, LLAMA_RISE, slack, Claimed(20, 80, 520), "fleet member 2 of 2")
    assert problem.startswith(
        "generation.records[].output_tokens (summed): 160 (with the 80 of the job's results accepted "
        "before it), more than the server counted: llamacpp:tokens_predicted_total rose by 125"
    )
    assert problem.endswith("(fleet member 2 of 2)")
