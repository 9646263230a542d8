"""Build the small LiteRT model examples/runtimes.yaml benchmarks (deterministic; needs ai-edge-litert).

    python examples/make_tflite.py [--out examples/models/tiny-mlp.tflite]

No .tflite ships in a PyPI wheel and converting one needs TensorFlow or litert-torch: the flatbuffer
is written with the schema ai-edge-litert ships (`drivers.files.litemodels`), an MLP of 3 fully connected
layers with ReLU on float[1, 64], every node of which XNNPACK takes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drivers.files.litemodels import write_mlp


def main() -> None:
    """Write the model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models" / "tiny-mlp.tflite")
    write_mlp(parser.parse_args().out)


if __name__ == "__main__":
    main()
