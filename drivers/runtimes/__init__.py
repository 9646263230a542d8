"""One driver per runtime, of one shape (`driver.Driver`), in one explicit registry: load, run,
placement, version. A runtime is imported inside its driver, never at start-up.

Modules:
    driver     the Driver interface the harness uses (load, inputs, run, placement, settings)
    registry   the explicit registry: compute unit -> driver
    onnx       onnxruntime: CPU (ONNX), GPU (ONNX) via CUDA / TensorRT / MIGraphX / DirectML / CoreML EP
    openvino   OpenVINO: CPU / GPU / NPU (OpenVINO) on the same .onnx, placement from the executed graph
    litert     LiteRT: CPU (LiteRT) on the interpreter with XNNPACK, placement = nodes delegated
    executorch ExecuTorch: CPU (ExecuTorch) on its C++ runtime with XNNPACK, placement read from the .pte
    torchrt    torch: CPU (PyTorch), GPU (PyTorch) for .pt2 and TorchScript (owner opt-in)
    coreml     coremltools: GPU (CoreML), Neural Engine (CoreML), macOS only
    llamacpp   llama.cpp (llama-cpp-cffi): the CPU / CUDA / Vulkan build of a unit loaded from its file,
               its log kept, the layers' placement read from it
    llamaunits CPU (llama.cpp), GPU (llama.cpp): the probe (a real load and decode) and registry entry
    llm        transformers: generation on CPU (PyTorch) / GPU (PyTorch) from GGUF or safetensors folders
    llmclock   the streamer that timestamps every generated token (imported only by llm)
    gguflm     llama.cpp: generation from a GGUF file, timed per token, llama.cpp's own pp / tg timers
    genruntime the shape both generation runtimes (llm, gguflm) offer the generate child
    notices    a runtime's informational lines on fd 2 held off the terminal, every other line kept
    missing    how a missing runtime is worded for this build (pip: the extra; the binary: not in
               this build)

Generation units and llama.cpp
------------------------------

`sark-node info` lists the units that generate here (`drivers.probe_generation`: each torch unit generates 2
tokens from a tiny in-memory Llama; each llama.cpp unit loads the packaged GGUF and decodes a token) with
the reason for each one that cannot. llama.cpp (`CPU (llama.cpp)`, `GPU (llama.cpp)`; llama-cpp-cffi,
installed with `--no-deps`) generates from a GGUF file without transformers:
`drivers/runtimes/genruntime.py` is the shape both generation runtimes offer `genchild`
(`runtime_for(unit)`: `drivers/runtimes/gguflm.py` for the llama.cpp units, `drivers/runtimes/llm.py` for
the others), so the frame, the meters, the request loop and the summary are one.
`drivers/runtimes/llamacpp.py` loads the unit's build (`_llama_cpp_cpu`, else `_llama_cpp_cuda_12_6_3` then
`_llama_cpp_vulkan_1_x`) from its file, never the `llama` package (whose `__init__` imports transformers),
routes llama.cpp's log into memory and reads the layers' devices from it. Where no GPU build loads (no
libcuda, no libvulkan), a `GPU (llama.cpp)` task runs as llama-cpp-cffi's own loader falls back, on the CPU
build with every layer still asked onto the GPU (`Target`: the build, the device asked, why no GPU build
runs); llama.cpp puts every layer on the CPU without a warning, and the row reads that from its log:
`fallback: CPU 100%, GPU 0%`, never the unit's figure (the probe lists the unit unusable with each build's
missing library, so only a lying or stale profile sends such a task). The probe
(`drivers/runtimes/llamaunits.py`) loads the packaged GGUF on the unit's build and decodes one token. Beside
the harness's clock, `llama_perf_context` (reset before the timed requests) gives prompt and generated
tokens and their times: `GenerationStats.runtime_rates`, the row's `RuntimePpTokPerS` and `RuntimeTgTokPerS`
(llama-bench's pp and tg), kept by `derive` only where they fit the records (`runtime_rates_fit`: the same
token total, a time within theirs), so the submitter refuses invented timers as inconsistent. Threads: the
job's, else the physical cores (ggml's threads spin: more threads than free cores is many times slower).
"""

__all__: list[str] = []
