"""White-box generation on llama.cpp (xllamacpp) with the real SmolLM2-135M GGUF and Gemma 3 270M (gemma3,
a 2025 family) in spawned children: the same per-token records and figures as the transformers path,
the layers' placement, llama.cpp's own timers beside the harness's, and the refusals made before the
model loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.extras import gemma3, need, smollm2

from drivers import TaskFailed, measure
from drivers.files.models import sha256_file
from drivers.probe.profile import probe_units
from protocol import ComputeUnit, FailureReason, GenerateSpec, Measurement, ModelFormat, Prompt, TaskSpec
from scheduler.results.genrows import generation_columns

CPU = ComputeUnit.CPU_LLAMACPP
GPU = ComputeUnit.GPU_LLAMACPP
PROMPTS = (
    Prompt(
        id="p1",
        text="Summarize in one sentence: The river rose after three days of rain, and volunteers "
        "filled sandbags along the main street until the water went down.",
        reference="Volunteers filled sandbags while the river flooded the town after three days of rain.",
    ),
    Prompt(id="p2", text="Name one colour of the sky.", reference="The sky is blue."),
)
NEW_TOKENS = 6


def _spec(**changes: object) -> TaskSpec:
    generate = GenerateSpec(
        prompts=PROMPTS,
        prompts_sha256="0" * 64,
        max_new_tokens=NEW_TOKENS,
        ignore_eos=True,
        quality=("rouge",),
    )
    base: dict[str, object] = {
        "compute_unit": CPU,
        "load_runs": 2,
        "warmups": 1,
        "timeout_s": 200,
        "threads": 1,  # ggml's threads spin: one per test on a shared two-core machine
        "generate": generate,
    }
    return TaskSpec.model_validate(base | changes)


def _gguf() -> Path:
    """SmolLM2's GGUF to run on llama.cpp: both wheels installed, or the test skips naming the missing one."""
    need("xllamacpp")
    return smollm2()


def _fails(path: Path, spec: TaskSpec, fmt: ModelFormat | None = None) -> TaskFailed:
    with pytest.raises(TaskFailed) as info:
        measure(path, spec, fmt=fmt)
    return info.value


@pytest.fixture(scope="module")
def measured() -> Measurement:
    return measure(_gguf(), _spec())


def test_every_request_timed_token_by_token(measured: Measurement) -> None:
    gen = measured.generation
    assert gen is not None
    assert (gen.requests, gen.errors) == (2, 0)
    for record, prompt in zip(gen.records, PROMPTS, strict=True):
        assert record.prompt_id == prompt.id
        assert record.output_tokens == NEW_TOKENS  # ignore_eos: always max_new_tokens
        assert len(record.token_times_ms) == NEW_TOKENS
        assert record.ttft_ms == record.token_times_ms[0] > 0
        assert record.e2e_ms == record.token_times_ms[-1]
        assert list(record.token_times_ms) == sorted(record.token_times_ms)
        assert record.prompt_tokens > 10  # llama.cpp applied the model's chat template
        assert record.output_text.strip()
    assert gen.itl_ms.n == 2 * (NEW_TOKENS - 1)
    assert gen.tpot_ms.n == 2
    assert gen.decode_tok_per_s > 0
    assert gen.prefill_tok_per_s > 0
    assert gen.token_source == f"tokenizer:{_gguf().name}@{sha256_file(_gguf())[:12]}"
    assert gen.rouge is not None
    assert gen.rouge.scored == 2


def test_llama_cpp_s_own_timers_count_the_timed_requests_tokens(measured: Measurement) -> None:
    gen = measured.generation
    assert gen is not None
    rates = gen.runtime_rates
    assert rates is not None
    assert rates.source == "llama.cpp server timings"
    # reset before the timed requests: the warm-up's tokens are not in them
    assert rates.prompt_tokens == sum(r.prompt_tokens for r in gen.records)
    assert rates.eval_tokens == sum(r.output_tokens - 1 for r in gen.records)  # the first is the prompt's
    pp, tg = rates.pp_tok_per_s(), rates.tg_tok_per_s()
    assert pp is not None
    assert tg is not None
    row = generation_columns(gen)
    assert row["RuntimePpTokPerS"] == f"{pp:.2f}"
    assert row["RuntimeTgTokPerS"] == f"{tg:.2f}"


def test_the_row_says_where_the_layers_ran_and_with_what(measured: Measurement) -> None:
    assert measured.providers == ("CPU",)
    assert measured.node_share == {"CPU": 1.0}
    assert not measured.fallback
    assert measured.load_ms.n == 2  # two fresh loads, each timed
    assert measured.peak_load_ram_mb > 50
    assert measured.conditions.intra_op_threads == 1
    assert "llama.cpp" in measured.conditions.runtime_versions


def test_the_gpu_unit_runs_every_layer_on_its_gpu_or_is_a_fallback_read_from_llama_cpp() -> None:
    statuses = {s.unit: s for s in probe_units()}
    if statuses[GPU].usable:  # a CUDA (or Vulkan) machine: every layer offloaded, never CPU
        on_gpu = measure(_gguf(), _spec(compute_unit=GPU, load_runs=1))
        assert on_gpu.providers[0] != "CPU"
        assert on_gpu.node_share == {on_gpu.providers[0]: 1.0}
        assert not on_gpu.fallback
        return
    # the build has no GPU device: the CPU backend runs in its place, every layer asked onto the GPU;
    # llama.cpp put them all on the CPU, and its log says so
    failure = _fails(_gguf(), _spec(compute_unit=GPU, load_runs=1))
    assert failure.reason == FailureReason.FALLBACK
    assert "0% of nodes on GPU (least 100%)" in failure.detail
    assert "(CPU 100%, GPU 0%)" in failure.detail


def test_a_safetensors_folder_is_refused_on_llama_cpp(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    failure = _fails(folder, _spec(), fmt=ModelFormat.SAFETENSORS)
    assert failure.reason == FailureReason.FORMAT
    assert "CPU (llama.cpp) generates from gguf" in failure.detail


def test_max_new_tokens_at_the_context_is_refused_before_loading() -> None:
    generate = GenerateSpec(prompts=PROMPTS[:1], prompts_sha256="0" * 64, max_new_tokens=4096)
    failure = _fails(_gguf(), _spec(generate=generate))
    assert failure.reason == FailureReason.INPUT
    assert "context of 4096 tokens" in failure.detail


def test_a_truncated_gguf_fails_naming_the_file_and_no_crash(tmp_path: Path) -> None:
    """Cut after its metadata, inside the tensors: refused by the header walk or by llama.cpp's own
    bounds check, as a reason, never a crashed child."""
    cut = tmp_path / "cut.gguf"
    with _gguf().open("rb") as f:
        cut.write_bytes(f.read(_gguf().stat().st_size // 2))
    failure = _fails(cut, _spec(load_runs=1))
    assert failure.reason in (FailureReason.FORMAT, FailureReason.LOAD), failure
    assert failure.detail.startswith("cut.gguf: "), failure.detail


def test_without_chat_the_prompt_is_the_text_alone(measured: Measurement) -> None:
    generate = GenerateSpec(prompts=PROMPTS[1:], prompts_sha256="0" * 64, max_new_tokens=2, chat=False)
    plain = measure(_gguf(), _spec(generate=generate, load_runs=1, warmups=0)).generation
    chatted = measured.generation
    assert plain is not None
    assert chatted is not None
    [record] = plain.records
    assert 0 < record.prompt_tokens < chatted.records[1].prompt_tokens  # no template around it


def test_gemma3_a_2025_family_generates_every_token_timed_with_llama_cpps_timers() -> None:
    need("xllamacpp")
    generate = GenerateSpec(
        prompts=PROMPTS, prompts_sha256="0" * 64, max_new_tokens=NEW_TOKENS, chat=False, ignore_eos=True
    )
    measured = measure(gemma3(), _spec(generate=generate, load_runs=1))
    gen = measured.generation
    assert gen is not None
    assert (gen.requests, gen.errors) == (2, 0)
    for record in gen.records:
        assert record.output_tokens == len(record.token_times_ms) == NEW_TOKENS
        assert list(record.token_times_ms) == sorted(record.token_times_ms)
        assert record.output_text.strip()
    assert measured.providers == ("CPU",)
    assert measured.node_share == {"CPU": 1.0}  # gemma3's 18 layers, read from llama.cpp's log
    rates = gen.runtime_rates
    assert rates is not None  # kept by derive only where they fit the records
    assert rates.prompt_tokens == sum(r.prompt_tokens for r in gen.records)
    assert rates.eval_tokens == sum(r.output_tokens - 1 for r in gen.records)


def test_chat_on_a_gguf_without_a_template_is_refused_before_loading() -> None:
    need("xllamacpp")
    generate = GenerateSpec(prompts=PROMPTS[:1], prompts_sha256="0" * 64, max_new_tokens=2)
    failure = _fails(gemma3(), _spec(generate=generate, load_runs=1, warmups=0))
    assert failure.reason == FailureReason.INPUT
    assert "has no chat template" in failure.detail


def test_an_architecture_llama_cpp_does_not_know_fails_with_its_own_words(tmp_path: Path) -> None:
    """The header is sound, the architecture unknown: llama.cpp's first error line is the reason."""
    data = _gguf().read_bytes()
    at = data.index(b"general.architecture") + len(b"general.architecture") + 4 + 8
    assert data[at : at + 5] == b"llama"
    odd = tmp_path / "odd.gguf"
    odd.write_bytes(data[:at] + b"llamz" + data[at + 5 :])
    failure = _fails(odd, _spec(load_runs=1))
    assert failure.reason == FailureReason.LOAD
    assert "unknown model architecture: 'llamz'" in failure.detail
