"""Device profile, runtime drivers and the measurement harness.

Modules:
    device     CPU, RAM, OS, GPUs (NVML, torch, nvidia-smi), runtime versions, fingerprint
    probe      detect_profile: the device facts and a truthful probe of every compute unit;
               probe_generation: which units generate (transformers, llama.cpp) here, with reasons
    driver     the Driver interface the harness uses (load, inputs, run, placement, settings)
    registry   the explicit registry: compute unit -> driver
    onnx       onnxruntime: CPU (ONNX), GPU (ONNX) via CUDA / TensorRT / MIGraphX / DirectML / CoreML EP
    openvino   OpenVINO: CPU / GPU / NPU (OpenVINO) on the same .onnx, placement from the executed graph
    litert     LiteRT: CPU (LiteRT) on the interpreter with XNNPACK, placement = nodes delegated
    litemodels small .tflite models written offline (the schema ai-edge-litert ships), for tests
    executorch ExecuTorch: CPU (ExecuTorch) on its C++ runtime with XNNPACK, placement read from the .pte
    ptefile    a .pte's instructions read from its bytes: XNNPACK's nodes, other partitions, kernel calls
    etmodels   small .pte programs lowered offline from torch.nn modules (a child runs it), for tests
    notices    a runtime's informational lines on fd 2 held off the terminal, every other line kept
    torchrt    torch: CPU (PyTorch), GPU (PyTorch) for .pt2 and TorchScript (owner opt-in)
    llm        transformers: generation on CPU (PyTorch) / GPU (PyTorch) from GGUF or safetensors folders
    llmclock   the streamer that timestamps every generated token (imported only by llm)
    llamacpp   llama.cpp (llama-cpp-cffi): the CPU / CUDA / Vulkan build of a unit loaded from its file,
               its log kept, the layers' placement read from it
    llamaunits CPU (llama.cpp), GPU (llama.cpp): the probe (a real load and decode) and registry entry
    gguflm     llama.cpp: generation from a GGUF file, timed per token, llama.cpp's own pp / tg timers
    genruntime the shape both generation runtimes (llm, gguflm) offer the generate child
    coreml     coremltools: GPU (CoreML), Neural Engine (CoreML), macOS only
    formats    model file checks before any runtime or pickle opens them (run in the child)
    headers    bounded safetensors and GGUF header checks against the file's size
    inputs     inputs synthesised from a model's signature, with overrides
    meters     the Meter shape; peak memory, CPU, NVML sampler, placement, thermal and power state
    energy     EnergyMeter (and IdleEnergy): idle and measured-phase energy from NVML or RAPL (a
               declared method, never an estimate), or the reason there is none
    offers     unit_offers, machine_telemetry: per unit, the energy method and telemetry this
               device offers, or why not
    telemetry  the sampler thread: CPU clock per core group, temperatures, CPU use and share, NVML GPU
    sustain    marks on the timed phase's time axis, and a sustained run's timed loop
    stats      the median's confidence interval and the warm-up rule (summaries: protocol.stats)
    harness    measure: the parent side, spawned children, timeout, cancel, the processes pooled
    jobs       what a measuring child is given (no runtime imported)
    frame      the measuring children's frame: boundary, stages, timed loads, meters stacked
    child      the spawned child's side of a measurement: one process's Measurement
    outputs    a fingerprint of a model's outputs (rounded, hashed) that replicas of one class compare
    challengechild  the CPU challenge's kernel (matrices from a seed, product, row digests), its child
    chainchild  the GPU challenge's kernel (an exact integer chain of products through torch on the
                claimed device, the CPU's in tests), its child, and the submitter's recomputation
    genchild   the spawned child's side of a generate task (load timed, warm-up, one request per prompt)
    calibrate  CPU matmul throughput and memory bandwidth, cached per device and runtime version
    models     models shipped in PyPI wheels, and small ONNX models built for tests and benchmarks
    sse        server-sent events of an OpenAI-compatible stream, decoded incrementally (pure)
    http1      HTTP/1.1 on trio sockets and h11: a keep-alive pool, each read stamped on arrival
    retrying   how a 429 or 5xx is retried: the policy's bounds, the server's Retry-After
    budget     the memory one run's requests in flight keep together (bytes, pieces), and its cut
    attempt    one attempt's body read as it arrives and decoded under the run's budget
    completion one streamed completion request to a model server, timed per read, as a RequestRecord
    loadoptions  EndpointOptions: how a load runs beyond its spec (retries, budget, the drain, ...)
    sender     the one request loop: closed, open (protocol.arrivals), a fleet deal, a capacity level
    rtt        the vantage point's TCP connect (and TLS handshake) time to a server
    endpoint   load against a model server through `sender`; `run_endpoint` for the spawned child
    fleetload  a fleet member's start instant on this worker's clock (its deal is sent by `sender`)
    servers    model servers the owner declared (gray-box): list their models, try each, statuses
    capacity   a capacity search under an SLO: one endpoint run per level, over-saturated levels ended
    endpointrun  one endpoint task -> Measurement (the worker runs it in its own loop)
    tokencount  a server's output counted with the campaign's pinned tokenizer, in a spawned child
    probechild detect_profile_apart, probe_servers_apart: the device probe, calibration and
               declared-server probes in a spawned child; the parent reads the result as JSON
    spawning   start_child, the one way drivers start a child: apart from Ctrl-C and the caller's
               folder, capped (RLIMIT_AS set here only), a start that failed said so
    childio    a spawned child from trio: its next message awaited, the child stopped and reaped
    missing    how a missing runtime is worded for this build (pip: the extra; the binary: not in
               this build)
    errors     DriverError, TaskFailed, ProbeFailed

The package's names load lazily, on first use: `import drivers` costs nothing, and a process that
only spawns children (a joined worker) never loads numpy, onnxruntime, torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from drivers.endpointrun import measure_endpoint
    from drivers.errors import DriverError, ProbeFailed, TaskFailed
    from drivers.formats import check_model_file, detect_format
    from drivers.harness import measure
    from drivers.loadoptions import EndpointOptions
    from drivers.offers import unit_offers
    from drivers.probe import detect_profile, probe_generation
    from drivers.probechild import detect_profile_apart, probe_servers_apart
    from drivers.servers import probe_server

_HOMES: Final = {
    "DriverError": "errors",
    "EndpointOptions": "loadoptions",
    "ProbeFailed": "errors",
    "TaskFailed": "errors",
    "check_model_file": "formats",
    "detect_format": "formats",
    "detect_profile": "probe",
    "detect_profile_apart": "probechild",
    "measure": "harness",
    "measure_endpoint": "endpointrun",
    "probe_generation": "probe",
    "probe_server": "servers",
    "probe_servers_apart": "probechild",
    "unit_offers": "offers",
}


def __getattr__(name: str) -> object:
    """Import a public name's module the first time the name is used."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'drivers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"drivers.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DriverError",
    "EndpointOptions",
    "ProbeFailed",
    "TaskFailed",
    "check_model_file",
    "detect_format",
    "detect_profile",
    "detect_profile_apart",
    "measure",
    "measure_endpoint",
    "probe_generation",
    "probe_server",
    "probe_servers_apart",
    "unit_offers",
]
