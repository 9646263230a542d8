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
"""

__all__: list[str] = []
