"""LiteRT (TFLite) driver: `CPU (LiteRT)` on the interpreter with its default XNNPACK delegate.

The interpreter hands the nodes XNNPACK takes to the delegate and runs the rest on its built-in CPU
kernels, silently. Placement is the delegated node count, read from the graph after delegation: each
DELEGATE node stands for the original nodes between its inputs and its outputs; their share is the
share on "XNNPACK" (what LiteRT's leaderboard shows as "nodes delegated N of M").

`GPU (LiteRT)` and `NPU (LiteRT)` run through LiteRT's CompiledModel API (WebGPU/OpenCL, vendor
dispatch libraries), which reports only whether a model is fully accelerated, not per node: they are
listed with that reason and not measured here yet.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from drivers.errors import TaskFailed
from drivers.files.inputs import Dim, InputSig
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from drivers.runtimes.missing import not_installed
from drivers.runtimes.notices import dropping
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus

DELEGATED: Final = "XNNPACK"
BUILTIN: Final = "builtin"
NOT_MEASURED: Final = (
    "not measured by sark-node yet: LiteRT runs {device} through its CompiledModel API, which says only "
    "whether a model is fully accelerated, not which nodes ran where"
)


NOTICE: Final = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
"""What LiteRT's C++ writes to fd 2 each time it applies XNNPACK (no setting silences it): in every
spawned child it would be a line on the user's terminal, and on `submit`'s one-line error."""


def _interpreter() -> Any:
    from ai_edge_litert import interpreter

    return interpreter


def _without_notice() -> contextlib.AbstractContextManager[None]:
    """fd 2 held while LiteRT builds an interpreter, every line but its delegate notice written back."""
    return dropping(lambda line: line == NOTICE)


def delegated_nodes(nodes: list[tuple[str, list[int], list[int]]]) -> tuple[int, int]:
    """(delegated, total) original nodes from (op name, inputs, outputs) after delegation: a DELEGATE
    node covers the nodes reached walking back from its outputs until its inputs."""
    original = [(i, ins, outs) for i, (name, ins, outs) in enumerate(nodes) if name != "DELEGATE"]
    producer = {t: i for i, _, outs in original for t in outs}
    inputs_of = {i: ins for i, ins, _ in original}
    covered: set[int] = set()
    for name, ins, outs in nodes:
        if name != "DELEGATE":
            continue
        stop, todo = set(ins), [t for t in outs if t in producer]
        while todo:
            node = producer[todo.pop()]
            if node in covered:
                continue
            covered.add(node)
            todo += [t for t in inputs_of[node] if t in producer and t not in stop]
    return len(covered), len(original)


def _ops(interpreter: Any) -> list[tuple[str, list[int], list[int]]]:
    return [
        (str(d["op_name"]), _ints(d["inputs"]), _ints(d["outputs"])) for d in interpreter._get_ops_details()
    ]


def _ints(values: Iterable[Any]) -> list[int]:
    return [int(v) for v in values]


def probe_cpu() -> tuple[bool, str]:
    """Run a 1-layer MLP on the interpreter: usable when XNNPACK took every node and the answer is right."""
    import numpy as np

    from drivers.files.litemodels import mlp_model

    try:
        with _without_notice():
            interpreter = _interpreter().Interpreter(
                model_content=mlp_model(width=4, layers=1), num_threads=1
            )
            interpreter.allocate_tensors()
        x = np.array([[1.0, -2.0, 3.0, 0.5]], dtype=np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        out = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    except Exception as exc:  # the runtime's error is the reason
        return False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if out.shape != (1, 4) or bool(np.any(out < 0)):
        return False, f"the probe model gave {out.tolist()}, not a ReLU's output"
    done, total = delegated_nodes(_ops(interpreter))
    if done != total:
        return False, f"XNNPACK took {done} of {total} probe nodes"
    return True, f"{DELEGATED} ({done}/{total} nodes)"


class LitertDriver:
    """The LiteRT interpreter on the CPU (XNNPACK delegate, built-in kernels for the rest)."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.TFLITE})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit

    def probe(self) -> UnitStatus:
        """The CPU: a real run of the probe model; GPU and NPU: listed with why they are not measured."""
        if importlib.util.find_spec("ai_edge_litert") is None:
            reason = not_installed(["ai_edge_litert"], "litert", "LiteRT units")
            return UnitStatus(unit=self.unit, usable=False, reason=reason)
        if self.unit != ComputeUnit.CPU_LITERT:
            device = self.unit.value.split(" ")[0]
            return UnitStatus(unit=self.unit, usable=False, reason=NOT_MEASURED.format(device=device))
        usable, said = probe_cpu()
        if not usable:
            return UnitStatus(unit=self.unit, usable=False, reason=said)
        return UnitStatus(unit=self.unit, usable=True, provider=said)

    def prepare(self) -> None:
        """Import the LiteRT interpreter."""
        _interpreter()

    def versions(self) -> dict[str, str]:
        """The ai-edge-litert version."""
        import importlib.metadata

        return {"ai-edge-litert": importlib.metadata.version("ai-edge-litert")}

    def load(self, path: Path, options: LoadOptions) -> LitertLoaded:
        """Open the .tflite in an interpreter (XNNPACK applied as tensors are allocated)."""
        if self.unit != ComputeUnit.CPU_LITERT:
            raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {self.probe().reason}")
        try:
            with _without_notice():
                interpreter = _interpreter().Interpreter(model_path=str(path), num_threads=options.threads)
                interpreter.allocate_tensors()
        except Exception as exc:  # translate the runtime's error at the seam
            text = str(exc).strip()
            raise TaskFailed(
                FailureReason.LOAD, f"LiteRT could not load the model: {type(exc).__name__}: {text[:300]}"
            ) from exc
        return LitertLoaded(interpreter, options.threads or 1)


class LitertLoaded:
    """A LiteRT interpreter with its tensors allocated."""

    def __init__(self, interpreter: Any, threads: int) -> None:
        self.interpreter, self.threads = interpreter, threads

    def inputs(self) -> list[InputSig]:
        """The interpreter's inputs; a -1 in the shape signature is a dynamic size."""
        sigs = []
        for d in self.interpreter.get_input_details():
            signature = d.get("shape_signature", d["shape"])
            dims: tuple[Dim, ...] = tuple(int(n) if n >= 0 else None for n in signature)
            sigs.append(InputSig(str(d["name"]), d["dtype"].__name__, dims))
        return sigs

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """Set each input, invoke, copy each output: what a bare loop of the interpreter's API does."""
        it = self.interpreter
        by_name = {str(d["name"]): d for d in it.get_input_details()}
        for name, array in feeds.items():
            if tuple(by_name[name]["shape"]) != array.shape:
                it.resize_tensor_input(by_name[name]["index"], list(array.shape))
        it.allocate_tensors()
        sets = [(by_name[name]["index"], array) for name, array in feeds.items()]
        outs = [d["index"] for d in it.get_output_details()]
        set_tensor, invoke, get_tensor = it.set_tensor, it.invoke, it.get_tensor

        def run() -> list[Any]:
            for index, array in sets:
                set_tensor(index, array)
            invoke()
            return [get_tensor(index) for index in outs]

        return run

    def placement(self) -> Placement:
        """The share of the model's nodes XNNPACK took; the rest ran on the built-in kernels."""
        done, total = delegated_nodes(_ops(self.interpreter))
        if total == 0:
            return Placement((DELEGATED,), asked=DELEGATED)
        share = {DELEGATED: done / total, BUILTIN: (total - done) / total}
        share = {k: v for k, v in share.items() if v > 0}
        providers = tuple(p for p in (DELEGATED, BUILTIN) if p in share)
        return Placement(providers, share, fallback=done == 0, asked=DELEGATED)

    def settings(self) -> Settings:
        """The interpreter's threads (1 unless the task set them)."""
        return Settings(intra_op_threads=self.threads)
