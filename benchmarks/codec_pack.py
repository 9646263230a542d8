"""Encoding a signed body, side by side: the codec's wire form with a container's leaves taken as they
are (`protocol.codec._plain` now) against one call per value (as before; kept here as the baseline,
`_per_value`).

The body is a real stored generation result (tests/golden/reports/llm_results.json, examples/llm.yaml's
measurement) grown to a busy endpoint's size: `--requests` records of `--tokens` timed tokens each, and
`--samples` raw latency samples. Each round packs it both ways in turn (`pack_body`, what a worker signs
and a submitter re-derives), so that the machine's load falls on both alike; the figures are the median
CPU time of a pack and the ratio now / before. The two byte strings must be equal. Prints a table and
writes benchmarks/out/codec_pack.json.

    .venv/bin/python benchmarks/codec_pack.py [--requests 64] [--tokens 256] [--samples 10000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import enum
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol import LocalProtocolError, Measurement, codec, pack_body  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "reports" / "llm_results.json"


def _per_value(value: object) -> Any:
    """The baseline: the wire form with one call per value (the codec before 2026-11-30)."""
    if isinstance(value, enum.Enum):
        return _per_value(value.value)
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, dict):
        return {str(k): _per_value(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_per_value(v) for v in value]
    raise LocalProtocolError(f"cannot encode a {type(value).__name__}")


def _body(requests: int, tokens: int, samples: int) -> Measurement:
    """The stored generation measurement with `requests` records of `tokens` token times each."""
    stored = json.loads(GOLDEN.read_text())["results"][0]["signed"]["measurement"]
    body = copy.deepcopy(stored)
    record = body["generation"]["records"][0]
    times = [0.5 * (k + 1) for k in range(tokens)]
    body["generation"]["records"] = [
        {**record, "token_times_ms": times, "output_tokens": tokens} for _ in range(requests)
    ]
    body["samples_ms"] = [1.0 + 1e-4 * k for k in range(samples)]
    return Measurement.model_validate(body)


def _cpu(call: Any) -> float:
    started = time.process_time()
    call()
    return time.process_time() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    body = _body(args.requests, args.tokens, args.samples)
    with mock.patch.object(codec, "_plain", _per_value):
        before_bytes = pack_body(body)
    if pack_body(body) != before_bytes:
        sys.exit("the two encodings differ")
    now, before = [], []
    for _ in range(args.rounds):
        now.append(_cpu(lambda: pack_body(body)))
        with mock.patch.object(codec, "_plain", _per_value):
            before.append(_cpu(lambda: pack_body(body)))
    result = {
        "bytes": len(before_bytes),
        "values": args.requests * args.tokens + args.samples,
        "before_ms": statistics.median(before) * 1000,
        "now_ms": statistics.median(now) * 1000,
        "rounds": args.rounds,
    }
    result["ratio"] = result["now_ms"] / result["before_ms"]
    print(f"| body | {result['bytes']:,} bytes, {result['values']:,} numbers |")
    print(f"| one call per value (before) | {result['before_ms']:.2f} ms |")
    print(f"| leaves taken as they are (now) | {result['now_ms']:.2f} ms |")
    print(f"| now / before | {result['ratio']:.3f}x |")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "codec_pack.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
