"""torch driver: `CPU (PyTorch)` and `GPU (PyTorch)` (CUDA, else MPS) for `.pt2` programs and TorchScript.

Both formats can execute code when loaded (torch.export.load unpickles, TorchScript is code), so the
driver loads them only when the owner opted in (`allow_code_models`), and the harness calls it only in
the spawned child. Plain pickles are refused earlier, by `drivers.files.formats.check_model_file`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drivers.errors import TaskFailed
from drivers.files.inputs import InputSig
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from drivers.runtimes.missing import not_installed
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus


def gpu_device(cuda: bool, mps: bool) -> str | None:
    """The torch device of `GPU (PyTorch)`: CUDA first, then Apple's MPS, else none."""
    if cuda:
        return "cuda:0"
    return "mps" if mps else None


def _torch() -> Any:
    import torch

    return torch


class TorchDriver:
    """torch on the CPU or on the first CUDA / MPS device."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.TORCH_EXPORT, ModelFormat.TORCHSCRIPT})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit

    def device(self) -> tuple[str | None, str]:
        """The torch device for this unit, or None and why."""
        if importlib.util.find_spec("torch") is None:
            return None, not_installed(["torch"], "torch", "PyTorch units")
        torch = _torch()
        if self.unit == ComputeUnit.CPU_TORCH:
            return "cpu", ""
        mps = bool(getattr(torch.backends, "mps", None)) and bool(torch.backends.mps.is_available())
        device = gpu_device(bool(torch.cuda.is_available()), mps)
        if device is None:
            return (
                None,
                f"torch {torch.__version__}: no CUDA device (built for CUDA {torch.version.cuda}) and no MPS",
            )
        return device, ""

    def probe(self) -> UnitStatus:
        """Run a relu on the device and synchronise."""
        device, reason = self.device()
        if device is None:
            return UnitStatus(unit=self.unit, usable=False, reason=reason)
        torch = _torch()
        try:
            out = torch.relu(torch.ones(1, 4, device=device))
            _synchronize(torch, device)
            ok = bool(out.sum().item() == 4.0)
        except Exception as exc:  # the runtime's error is the reason
            return UnitStatus(unit=self.unit, usable=False, reason=f"{type(exc).__name__}: {exc}")
        return UnitStatus(
            unit=self.unit, usable=ok, reason="" if ok else "probe gave a wrong result", provider=device
        )

    def prepare(self) -> None:
        """Import torch (1.5 s: kept out of load time)."""
        if importlib.util.find_spec("torch") is not None:
            _torch()

    def versions(self) -> dict[str, str]:
        """The torch version, when installed."""
        return {"torch": str(_torch().__version__)} if importlib.util.find_spec("torch") else {}

    def load(self, path: Path, options: LoadOptions) -> TorchLoaded:
        """Load a `.pt2` exported program or a TorchScript archive onto the device (owner opt-in only)."""
        if not options.allow_code_models:
            raise TaskFailed(
                FailureReason.FORMAT,
                f"{path.name}: torch programs run code when loaded; the owner has not opted in",
            )
        device, reason = self.device()
        if device is None:
            raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {reason}")
        torch = _torch()
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        try:
            if options.fmt == ModelFormat.TORCH_EXPORT or (options.fmt is None and path.suffix == ".pt2"):
                program = torch.export.load(str(path))
                return TorchLoaded(program.module().to(device), device, _export_inputs(program))
            module = torch.jit.load(str(path), map_location=device)
        except Exception as exc:  # translate the runtime's error at the seam
            raise TaskFailed(
                FailureReason.LOAD, f"torch could not load the model: {type(exc).__name__}: {exc}"
            ) from exc
        names = [a.name for a in module.forward.schema.arguments[1:]]
        return TorchLoaded(module.eval(), device, [InputSig(n, "float32", None) for n in names])


def _export_inputs(program: Any) -> list[InputSig]:
    user = set(program.graph_signature.user_inputs)
    sigs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            val = node.meta["val"]
            shape = tuple(d if isinstance(d, int) else None for d in val.shape)
            sigs.append(InputSig(node.name, str(val.dtype).removeprefix("torch."), shape))
    return sigs


def _synchronize(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


class TorchLoaded:
    """A torch module on a device with its declared inputs."""

    def __init__(self, module: Any, device: str, sigs: list[InputSig]) -> None:
        self.module, self.device, self.sigs = module, device, sigs

    def inputs(self) -> list[InputSig]:
        """Inputs from the exported program's signature (TorchScript: names only)."""
        return self.sigs

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """One forward pass in inference mode, synchronised with the device so the clock sees it all."""
        torch = _torch()
        tensors = [torch.from_numpy(feeds[s.name]).to(self.device) for s in self.sigs]
        module, device = self.module, self.device

        def run() -> object:
            with torch.inference_mode():
                out = module(*tensors)
            _synchronize(torch, device)
            return out

        return run

    def placement(self) -> Placement:
        """The device the module lives on."""
        return Placement((self.device,))

    def settings(self) -> Settings:
        """torch's intra- and inter-op thread counts."""
        torch = _torch()
        return Settings(
            intra_op_threads=int(torch.get_num_threads()),
            inter_op_threads=int(torch.get_num_interop_threads()),
        )
