"""ExecuTorch driver: `CPU (ExecuTorch)`, a .pte program on ExecuTorch's C++ runtime with XNNPACK.

A .pte is lowered ahead of time: the partitioner hands XNNPACK what it takes and leaves the rest to
ExecuTorch's portable CPU kernels, silently. Placement is read from the program itself
(`drivers.files.ptefile`): XNNPACK's nodes inside its delegate partitions against the kernel calls outside
them, the share on "XNNPACK" and on "portable".

The runtime is ExecuTorch's C++ pybindings module (`executorch.extension.pybindings._C`), the very
calls `executorch.runtime.Runtime` makes (`_load_program`, `load_method`, the method's call; one
test runs both on one program). The `executorch.runtime` wrapper is not imported: its module
imports `executorch.exir` (the export toolchain, torch's dynamo and inductor) for one warning class,
5 to 12 s per child on 2 cores, paid by every device probe; the bindings load in milliseconds once
torch (libtorch, which they link) is imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from drivers.errors import TaskFailed
from drivers.files.inputs import InputSig
from drivers.files.ptefile import XNNPACK_ID, PteCounts, read_counts
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from drivers.runtimes.missing import FROZEN, not_installed
from drivers.runtimes.notices import dropping
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus

XNNPACK: Final = "XNNPACK"
PORTABLE: Final = "portable"
VERSION: Final = "1.5.1"
PROBE_MODEL: Final = Path(__file__).parents[1] / "assets" / "probe.pte"
"""Linear(4, 4) with identity weights and ReLU, lowered to XNNPACK (`python -m drivers.files.etmodels`)."""
NOTICES: Final = (b"[cpuinfo_utils.cpp:", b"[threadpool.cpp:")
"""Info lines ExecuTorch's C++ writes to fd 2 when its thread pool starts or is resized."""
# ExecuTorch's ScalarType codes (c10's numbering) -> numpy dtype names.
DTYPES: Final = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32"}
DTYPES_MORE: Final = {7: "float64", 11: "bool"}


def _runtime() -> Any:
    import torch  # noqa: F401  (loads libtorch, which the bindings are linked against)
    from executorch.extension.pybindings import _C

    return _C


def _torch() -> Any:
    import torch

    return torch


def _quiet() -> contextlib.AbstractContextManager[None]:
    return dropping(lambda line: line.startswith(NOTICES))


def _missing() -> str:
    if FROZEN:
        return not_installed(["executorch"], "executorch", "ExecuTorch units")
    return (
        f"executorch not installed (install sark-node[executorch], then "
        f"pip install --no-deps executorch=={VERSION})"
    )


def probe_cpu() -> tuple[bool, str]:
    """Run the probe program: usable when XNNPACK holds every node and relu(x) comes back."""
    try:
        et = _runtime()
        import torch

        with _quiet():
            program = et._load_program(
                str(PROBE_MODEL), program_verification=et.Verification.InternalConsistency
            )
            method = program.load_method("forward")
            (out,) = method([torch.tensor([[1.0, -2.0, 3.0, 0.5]])])
    except Exception as exc:  # the runtime's error is the reason
        return False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if out.tolist() != [[1.0, 0.0, 3.0, 0.5]]:
        return False, f"the probe program gave {out.tolist()}, not relu(x)"
    counts = read_counts(PROBE_MODEL.read_bytes())
    done = counts.delegated.get(XNNPACK_ID, 0)
    if done != counts.total or not et._is_available(XNNPACK_ID):
        return False, f"XNNPACK took {done} of {counts.total} probe nodes"
    return True, f"{XNNPACK} ({done}/{counts.total} nodes)"


class ExecutorchDriver:
    """ExecuTorch's runtime on the CPU (XNNPACK partitions, portable kernels for the rest)."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.PTE, ModelFormat.TORCH_EXPORT})
    converts: frozenset[ModelFormat] = frozenset({ModelFormat.TORCH_EXPORT})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit

    def probe(self) -> UnitStatus:
        """A real run of the probe program on the CPU."""
        if importlib.util.find_spec("executorch") is None or importlib.util.find_spec("torch") is None:
            return UnitStatus(unit=self.unit, usable=False, reason=_missing())
        usable, said = probe_cpu()
        if not usable:
            return UnitStatus(unit=self.unit, usable=False, reason=said)
        return UnitStatus(unit=self.unit, usable=True, provider=said)

    def prepare(self) -> None:
        """Import torch and the runtime's bindings (1.5 s for torch: kept out of load time)."""
        _runtime()

    def versions(self) -> dict[str, str]:
        """The executorch version."""
        import importlib.metadata

        return {"executorch": importlib.metadata.version("executorch")}

    def convert(self, path: Path, out: Path, options: LoadOptions) -> tuple[Path, str]:
        """Lower a `torch.export` program (.pt2) to a .pte with the XNNPACK partitioner, in this child
        (owner opt-in only: loading a .pt2 unpickles). The toolchain's chatter on fd 2 (torchao's
        missing CUDA kernels, torch's notices) and its Python warnings are held off; a failure is
        its exception, as the detail."""
        if not options.allow_code_models:
            raise TaskFailed(
                FailureReason.FORMAT,
                f"{path.name}: torch programs run code when loaded; the owner has not opted in",
            )
        import warnings

        from drivers.files.etmodels import lower_exported

        try:
            with dropping(lambda _: True), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = _torch().export.load(str(path))
                data = lower_exported(program)
        except Exception as exc:  # translate the toolchain's error at the seam
            text = str(exc).strip()
            raise TaskFailed(
                FailureReason.LOAD,
                f"ExecuTorch could not lower the program: {type(exc).__name__}: {text[:300]}",
            ) from exc
        lowered = out / f"{path.stem}.pte"
        lowered.write_bytes(data)
        version = self.versions()["executorch"]
        return lowered, f"torch.export .pt2 to .pte by executorch {version} (XNNPACK partitioner)"

    def load(self, path: Path, options: LoadOptions) -> ExecutorchLoaded:
        """Load the program (verified for internal consistency) and its method, as
        `Runtime.load_program(path).load_method(name)` does."""
        et = _runtime()
        try:
            with _quiet():
                if options.threads and et._threadpool_get_thread_count() != options.threads:
                    # Resizing the pool under a loaded XNNPACK program crashes the process: only ever
                    # before this child's first program of the task (probes and loads let go by then).
                    et._unsafe_reset_threadpool(options.threads)
                program = et._load_program(
                    str(path), program_verification=et.Verification.InternalConsistency
                )
                names = [program.get_method_name(i) for i in range(program.num_methods())]
                name = "forward" if "forward" in names else names[0] if len(names) == 1 else ""
                if not name:
                    raise TaskFailed(FailureReason.INPUT, f"no forward method among {names[:8]}")
                method = program.load_method(name)
        except TaskFailed:
            raise
        except Exception as exc:  # translate the runtime's error at the seam
            text = str(exc).strip()
            raise TaskFailed(
                FailureReason.LOAD,
                f"ExecuTorch could not load the program: {type(exc).__name__}: {text[:300]}",
            ) from exc
        return ExecutorchLoaded(program, method, path, int(et._threadpool_get_thread_count()))


class ExecutorchLoaded:
    """A loaded ExecuTorch program and its method."""

    def __init__(self, program: Any, method: Any, path: Path, threads: int) -> None:
        self.program, self.method, self.path, self.threads = program, method, path, threads

    def inputs(self) -> list[InputSig]:
        """The method's tensor inputs, static sizes (ExecuTorch names none: input_0, input_1, ...)."""
        meta = self.method.method_meta()
        sigs = []
        for i in range(meta.num_inputs()):
            info = meta.input_tensor_meta(i)
            code = int(info.dtype())
            dtype = DTYPES.get(code) or DTYPES_MORE.get(code) or f"scalar type {code}"
            sigs.append(InputSig(f"input_{i}", dtype, tuple(int(n) for n in info.sizes())))
        return sigs

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """One call of the method on tensors made once from the feeds (`Method.execute`'s own call;
        its outputs are copied out on every call, as the Runtime API does)."""
        import torch

        tensors = [torch.from_numpy(feeds[s.name]) for s in self.inputs()]
        method = self.method

        def run() -> object:
            return method(tensors)

        return run

    def placement(self) -> Placement:
        """The share of the program's nodes on XNNPACK; the rest ran on the portable kernels (or on
        another backend the program was lowered to)."""
        return placement_of(read_counts(self.path.read_bytes()))

    def settings(self) -> Settings:
        """ExecuTorch's thread pool size (XNNPACK's threads)."""
        return Settings(intra_op_threads=self.threads)


def placement_of(counts: PteCounts) -> Placement:
    """Shares per place: XNNPACK's nodes, another backend's partitions, the portable kernel calls."""
    total = counts.total
    if total == 0:
        return Placement((XNNPACK,), asked=XNNPACK)
    named = {XNNPACK if k == XNNPACK_ID else k: v for k, v in counts.delegated.items()}
    share = {k: v / total for k, v in (named | {PORTABLE: counts.kernels}).items() if v > 0}
    providers = tuple(sorted(share, key=lambda k: (k != XNNPACK, -share[k], k)))
    return Placement(providers, share, fallback=XNNPACK not in share, asked=XNNPACK)


__all__ = ["ExecutorchDriver", "ExecutorchLoaded", "placement_of", "probe_cpu"]
