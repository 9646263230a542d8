"""Small ExecuTorch programs (.pte) lowered offline from plain `torch.nn` modules, for tests, the
example and benchmarks: `torch.export`, then `to_edge_transform_and_lower` with the XNNPACK
partitioner (or none), then `to_executorch`.

    python -m drivers.files.etmodels OUT_DIR [--exported] [NAME ...]

writes OUT_DIR/NAME.pte for each name of `MODELS` (all by default); with `--exported`, the module's
`torch.export` program instead (NAME.pt2), what a campaign names for a worker to lower itself
(`drivers.runtimes.executorch`'s conversion, `lower_exported`). Lowering imports ExecuTorch's
export toolchain (executorch.exir, torchao: seconds, and warnings on stderr), so callers run this in
a child process; the driver itself (`drivers.runtimes.executorch`) never imports it. Weights are seeded, so
the bytes are the same on every run of the same versions.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final


@dataclass(frozen=True)
class Shape:
    """One program: an MLP of `layers` x (Linear, ReLU) on float[1, width], or with `size`, a convnet
    of `layers` x (Conv2d 3x3 padded, ReLU) on float[1, width, size, size].

    Attributes:
        width: the features (channels) in and out.
        layers: Linear (or Conv2d) + ReLU pairs.
        tail: "cumsum" adds a cumulative sum, an op XNNPACK does not take (it runs on ExecuTorch's
            portable kernels); "" adds nothing.
        delegate: lower with the XNNPACK partitioner; False keeps every op on the portable kernels.
        identity: Linear weights = identity and biases 0 (the probe: relu(x) is the known answer).
        size: the convnet's height and width; 0: the MLP.
    """

    width: int = 64
    layers: int = 3
    tail: str = ""
    delegate: bool = True
    identity: bool = False
    size: int = 0

    def example(self) -> tuple[int, ...]:
        """The input's shape."""
        return (1, self.width, self.size, self.size) if self.size else (1, self.width)


MODELS: Final = {
    "mlp": Shape(),
    "cumsum-tail": Shape(tail="cumsum"),
    "undelegated": Shape(delegate=False),
    "wide": Shape(width=512, layers=4),
    "probe": Shape(width=4, layers=1, identity=True),
    "convnet": Shape(width=32, layers=4, size=40),  # a few ms per inference (benchmarks)
}


def module(shape: Shape) -> Any:
    """The torch module of `shape`, in eval mode, seeded."""
    import torch
    from torch import nn

    torch.manual_seed(1)
    linears: list[Any] = [
        nn.Conv2d(shape.width, shape.width, 3, padding=1)
        if shape.size
        else nn.Linear(shape.width, shape.width)
        for _ in range(shape.layers)
    ]
    if shape.identity:
        with torch.no_grad():
            for layer in linears:
                layer.weight.copy_(torch.eye(shape.width))
                layer.bias.zero_()

    def forward(self: Any, x: Any) -> Any:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return torch.cumsum(x, dim=1) if shape.tail == "cumsum" else x

    # The class is built with type(), not a class statement: where torch is not installed (the dev
    # extra alone) mypy reads `nn.Module` as Any, and --strict refuses a class statement on an Any base.
    mlp = type("Mlp", (nn.Module,), {"forward": forward})()
    mlp.layers = nn.ModuleList(linears)
    return mlp.eval()


def exported(shape: Shape) -> Any:
    """`shape`'s module through `torch.export` (an ExportedProgram)."""
    import torch

    return torch.export.export(module(shape), (torch.randn(*shape.example()),))


def lower_exported(program: Any, *, delegate: bool = True) -> bytes:
    """An ExportedProgram lowered to .pte bytes: `to_edge_transform_and_lower` with the XNNPACK
    partitioner (or none), then `to_executorch`."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    partitioners = [XnnpackPartitioner()] if delegate else []
    return bytes(to_edge_transform_and_lower(program, partitioner=partitioners).to_executorch().buffer)


def lower(shape: Shape) -> bytes:
    """The .pte bytes of `shape`'s module, exported and lowered."""
    return lower_exported(exported(shape), delegate=shape.delegate)


def main(argv: list[str] | None = None) -> None:
    """Write the named programs into the folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--exported", action="store_true", help="write NAME.pt2 (torch.export) instead")
    parser.add_argument("names", nargs="*", help=", ".join(MODELS))
    args = parser.parse_args(argv)
    names = args.names or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r} (one of {', '.join(MODELS)})")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        if args.exported:
            import torch

            torch.export.save(exported(MODELS[name]), str(args.out / f"{name}.pt2"))
        else:
            (args.out / f"{name}.pte").write_bytes(lower(MODELS[name]))
    print("written", " ".join(names), file=sys.stdout)


if __name__ == "__main__":
    main()
