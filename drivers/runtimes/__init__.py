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
    llamacpp   llama.cpp (xllamacpp): the device of a unit, llama.cpp's load log caught, the layers'
               placement read from it
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
the reason for each one that cannot. llama.cpp (`CPU (llama.cpp)`, `GPU (llama.cpp)`; xllamacpp, the
`llamacpp` extra) generates from a GGUF file without transformers:
`drivers/runtimes/genruntime.py` is the shape both generation runtimes offer `genchild`
(`runtime_for(unit)`: `drivers/runtimes/gguflm.py` for the llama.cpp units, `drivers/runtimes/llm.py` for
the others), so the frame, the meters, the request loop and the summary are one.
`drivers/runtimes/llamacpp.py` finds the unit's device among those llama.cpp lists (xllamacpp's CPU wheel: the
CPU; its CUDA wheels: CUDA0 too), catches llama.cpp's log of a load and reads the layers' devices from it,
then leaves the log paused (a paused log drops every line: nothing llama.cpp writes later reaches the node's
stderr). Where the build has no GPU device, a `GPU (llama.cpp)` task runs on the CPU backend with every layer
still asked onto the GPU (`Target`: the device asked, why no GPU device runs); llama.cpp puts every layer on
the CPU without a warning, and the row reads that from its log: `fallback: CPU 100%, GPU 0%`, never the unit's
figure (the probe lists the unit unusable with the reason, so only a lying or stale profile sends such a
task). The probe (`drivers/runtimes/llamaunits.py`) loads the packaged GGUF on the unit's device and decodes
one token.
Beside the harness's clock, llama.cpp's server timings of each timed request (summed; the first token,
sampled from the prompt's logits, left out of generation as its timer leaves it out) give prompt and
generated tokens and their times: `GenerationStats.runtime_rates`, the row's `RuntimePpTokPerS` and
`RuntimeTgTokPerS` (llama-bench's pp and tg), kept by `derive` only where they fit the records
(`runtime_rates_fit`: the same token total, a time within theirs), so the submitter refuses invented
timers as inconsistent. Threads: the job's, else the physical cores (ggml's threads spin: more threads
than free cores is many times slower).
"""

__all__: list[str] = []
