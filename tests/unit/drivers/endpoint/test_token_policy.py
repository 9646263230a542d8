"""Every generation row declares how it counted tokens and what its TTFT includes (issue 24).

A scripted loopback server (`lab.sse_server`) sends streams with and without a usage chunk, several
tokens per chunk, and reasoning deltas before the answer; the endpoint run (`measure_endpoint`, the
worker's own entry) measures them, the submitter's check derives the figures again, and the row
shows TokenSource, TokensPerChunkMean, UsageVsCountedTokens, TtfoMsMedian and ReasoningTokensMean.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from kit.bpe import tokenizer_json
from kit.extras import needs
from kit.sse_server import Reply, scheduled, serve_sse

from drivers.endpoint.completion import RetryPolicy
from drivers.endpoint.load import EndpointOptions
from drivers.endpoint.task import measure_endpoint
from protocol import ComputeUnit, Endpoint, GenerateSpec, Measurement, Prompt, TaskSpec
from protocol.tokenizer import Pinned, pin
from scheduler import check_figures
from scheduler.results import generation_columns

OPTIONS = EndpointOptions(retry=RetryPolicy(max_retries=0), rtt_samples=1)
ANSWER = ["The quick brown", " fox jumps over", " the lazy dog"]  # several tokens in each chunk


def _task(**fields: object) -> TaskSpec:
    prompts = (Prompt(id="p0", text="one"), Prompt(id="p1", text="two"))
    values: dict[str, object] = {
        "prompts": prompts,
        "prompts_sha256": "0" * 64,
        "endpoint": Endpoint(model="m"),
    }
    generate = GenerateSpec.model_validate(values | fields)
    return TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, timeout_s=30.0, generate=generate)


async def _row(
    script: Callable[[dict[str, object], int], Reply], task: TaskSpec
) -> tuple[Measurement, dict[str, str]]:
    with serve_sse(script) as server:
        measured = await measure_endpoint(task, server.url, OPTIONS)
    checked = check_figures(measured, task)  # the submitter derives every figure again
    assert isinstance(checked, Measurement), checked
    assert checked.generation is not None
    return checked, generation_columns(checked.generation)


async def test_usage_gives_server_usage_and_the_tokens_in_each_chunk() -> None:
    _, row = await _row(lambda body, n: scheduled(ANSWER, usage=(4, 9)), _task())
    assert row["TokenSource"] == "server-usage"
    assert row["TokensPerChunkMean"] == "3.000"  # 9 tokens in 3 chunks
    assert (row["TokensCounted"], row["UsageVsCountedTokens"], row["ReasoningTokensMean"]) == (
        "False",
        "",
        "0.00",
    )
    assert row["TtfoMsMedian"] == row["TtftMsMedian"]  # no reasoning: the first token is the answer's


async def test_without_usage_each_chunk_counts_as_one_token_and_says_so() -> None:
    measured, row = await _row(lambda body, n: scheduled(ANSWER), _task())
    assert (row["TokenSource"], row["TokensCounted"], row["TokensPerChunkMean"]) == (
        "chunks",
        "True",
        "1.000",
    )
    assert measured.generation is not None
    assert [r.output_tokens for r in measured.generation.records] == [3, 3]


@needs("tokenizers")
async def test_a_pinned_tokenizer_counts_what_the_server_did_not_and_checks_what_it_did() -> None:
    pinned = pin("tok", tokenizer_json())
    text_tokens = len(Pinned(tokenizer_json(), "tok").encode("".join(ANSWER)))
    measured, row = await _row(lambda body, n: scheduled(ANSWER), _task(tokenizer=pinned))
    assert row["TokenSource"] == f"tokenizer:tok@{pinned.sha256[:12]}"
    assert measured.generation is not None
    assert {r.output_tokens for r in measured.generation.records} == {text_tokens}
    assert row["TokensPerChunkMean"] == f"{text_tokens / 3:.3f}"

    claimed = text_tokens + 2  # a server whose usage says 2 tokens more than its text holds
    _, row = await _row(lambda body, n: scheduled(ANSWER, usage=(4, claimed)), _task(tokenizer=pinned))
    assert row["TokenSource"] == "server-usage"
    assert row["UsageVsCountedTokens"] == f"{100 * 2 / text_tokens:+.2f}%"


async def test_reasoning_tokens_come_before_the_answer_so_ttfo_is_later_than_ttft() -> None:
    thinking = ["Let me", " think", " about it."]
    script = lambda body, n: scheduled(ANSWER, every_s=0.05, thinking=thinking, usage=(4, 12, 5))  # noqa: E731
    measured, row = await _row(script, _task())
    assert float(row["TtfoMsMedian"]) > float(row["TtftMsMedian"])  # three reasoning deltas came first
    assert row["ReasoningTokensMean"] == "5.00"  # the usage's completion_tokens_details
    assert measured.generation is not None
    record = measured.generation.records[0]
    assert record.output_text == "".join(ANSWER)  # the answer only: ROUGE never scores the thinking
    assert (record.chunks, len(record.token_times_ms)) == (6, 6)  # TTFT and ITL see every token
    assert record.ttfo_ms == record.token_times_ms[3]


async def test_without_usage_reasoning_is_counted_by_its_chunks() -> None:
    script = lambda body, n: scheduled(["Yes."], thinking=["hmm", " well"])  # noqa: E731
    _, row = await _row(script, _task())
    assert (row["ReasoningTokensMean"], row["TokenSource"]) == ("2.00", "chunks")


async def test_each_request_asks_its_own_output_length_and_its_record_keeps_the_counts() -> None:
    prompts = (Prompt(id="r1", text="a b", input_tokens=2, output_tokens=5),)
    task = _task(prompts=prompts, ignore_eos=True, dataset_seed=7)
    bodies: list[dict[str, object]] = []

    def script(body: dict[str, object], n: int) -> Reply:
        bodies.append(body)
        return scheduled(ANSWER, usage=(2, 9))

    measured, row = await _row(script, task)
    assert (bodies[0]["max_tokens"], bodies[0]["min_tokens"], bodies[0]["ignore_eos"]) == (5, 5, True)
    assert measured.generation is not None
    record = measured.generation.records[0]
    assert (record.input_tokens_asked, record.output_tokens_asked, record.dataset_seed) == (2, 5, 7)
    assert row["DatasetSeed"] == "7"
    assert json.loads(json.dumps(bodies[0]))["messages"] == [{"role": "user", "content": "a b"}]
