"""CLI start-up: `sark-node --help` against a bare `import typer, rich`, side by side, and the wall
time of `id`, `status` and `peers` (against a gate address nobody listens on: a quick failure).

Each round runs every case once, in turn, so that the machine's load falls on all of them alike;
the figure is the median over rounds. Prints a table and writes benchmarks/out/startup.json.

    .venv/bin/python benchmarks/startup.py [--rounds 15] [--binary dist/sark-node/sark-node]

`--binary PATH` adds the built binary's `--help` and `--version` (README's binary command) to the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SARK = [sys.executable, "-c", "from node.cli import main; main()"]
NOBODY = "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"
TARGET_RATIO = 2.0


def _cases(home: Path, binary: Path | None) -> dict[str, tuple[list[str], bool]]:
    """name: (argv, must exit 0)."""
    built: dict[str, tuple[list[str], bool]] = {}
    if binary is not None:
        built = {
            "binary --help": ([str(binary.resolve()), "--help"], True),
            "binary --version": ([str(binary.resolve()), "--version"], True),
        }
    return {
        "import typer, rich": ([sys.executable, "-c", "import typer, rich"], True),
        "sark-node --help": ([*SARK, "--help"], True),
        "sark-node id": ([*SARK, "id"], True),
        "sark-node status": ([*SARK, "status"], True),
        "sark-node peers (no gate there)": ([*SARK, "peers", "--gate", NOBODY, "--timeout", "1"], False),
        **built,
    }


def _time(argv: list[str], env: dict[str, str], must_succeed: bool) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    if must_succeed and done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--binary", type=Path, help="the built binary, e.g. dist/sark-node/sark-node")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SARK_"))}
        env["HOME"] = home
        cases = _cases(Path(home), args.binary)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (argv, must) in cases.items():
                samples[name].append(_time(argv, env, must))
    medians = {name: statistics.median(s) for name, s in samples.items()}
    base = medians["import typer, rich"]
    print(f"{'case':34} {'median s':>9} {'x typer+rich':>13}")
    for name, value in medians.items():
        print(f"{name:34} {value:9.3f} {value / base:13.2f}")
    ratio = medians["sark-node --help"] / base
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"--help / import typer, rich = {ratio:.2f} ({verdict} the {TARGET_RATIO}x target)")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    report = {"rounds": args.rounds, "medians_s": medians, "help_ratio": ratio, "samples_s": samples}
    (out / "startup.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
