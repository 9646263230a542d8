"""Re-deriving a stored result at every output write vs reading the derived measurement the store kept.

Every output (results.csv, results.json, report, the dashboard's and the REST API's reads) rebuilds
its rows from a task's typed value. The store keeps the measurement the submitter derived beside the
signed envelope (`node/submitter/store.py`); the alternative was `protocol.derive` on the envelope's
measurement at every write. This prints, for the largest results the wire allows (a tensor task at
`MAX_SAMPLES` timed runs over 4 processes, a white-box generate task at `MAX_RECORDS` requests of 64
tokens with ROUGE), side by side in one run: `derive` (best of `--rounds`), unpacking the stored
derived measurement, and its packed size. Writes benchmarks/out/stored_derived.json.

    .venv/bin/python benchmarks/stored_derived.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from protocol import (
    MAX_SAMPLES,
    ComputeUnit,
    GenerateSpec,
    Measurement,
    Prompt,
    RequestRecord,
    Stats,
    TaskSpec,
    derive,
)
from protocol.codec import pack_body, unpack_body
from protocol.generation import MAX_RECORDS
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES

OUT = Path(__file__).resolve().parent / "out" / "stored_derived.json"
REFERENCE = "the quick brown fox jumps over the lazy dog again"
STATS = Stats(n=1, min=1, max=1, mean=1, median=1, stddev=0, p90=1, p95=1, p99=1, cv=0)


def _tensor() -> tuple[Measurement, TaskSpec]:
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=MAX_SAMPLES // 4, processes=4, load_runs=1)
    raw = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=STATS,
        load_first_ms=1.0,
        first_inference_ms=1.0,
        warmups_used=1,
        inference_ms=STATS,
        samples_ms=tuple(1.0 + (i % 97) / 100 for i in range(MAX_SAMPLES)),
        process_runs=(MAX_SAMPLES // 4,) * 4,
        load_samples_ms=(9.0,) * 4,
        first_inferences_ms=(2.0,) * 4,
        peak_load_ram_mb=1.0,
        peak_inference_ram_mb=1.0,
        cpu_cores_used=1.0,
    )
    return derive(raw, spec), spec


def _record(i: int) -> RequestRecord:
    times = [5.0 + i % 7]
    for j in range(1, 64):
        times.append(times[-1] + 0.5 + (j % 5) * 0.125)
    text = " ".join(REFERENCE.split()[(i + w) % 10] for w in range(20))
    return RequestRecord(
        prompt_id="p",
        prompt_tokens=7,
        output_tokens=64,
        ttft_ms=times[0],
        e2e_ms=times[-1],
        token_times_ms=tuple(times),
        output_text=text,
        started_s=i * 0.01,
    )


def _generate() -> tuple[Measurement, TaskSpec]:
    generate = GenerateSpec(
        prompts=(Prompt(id="p", text="say it", reference=REFERENCE),),
        prompts_sha256="0" * 64,
        max_new_tokens=64,
        quality=("rouge",),
    )
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_TORCH, runs=1, load_runs=1, processes=1, generate=generate)
    records = [_record(i) for i in range(MAX_RECORDS)]
    wall_s = max(r.started_s + r.e2e_ms / 1000 for r in records) + 0.1
    raw = Measurement(
        compute_unit=ComputeUnit.CPU_TORCH,
        load_ms=NO_SAMPLES,
        load_first_ms=1.0,
        first_inference_ms=1.0,
        warmups_used=1,
        inference_ms=NO_SAMPLES,
        samples_ms=tuple(r.e2e_ms for r in records),
        process_runs=(MAX_RECORDS,),
        load_samples_ms=(900.0,),
        first_inferences_ms=(80.0,),
        peak_load_ram_mb=1.0,
        peak_inference_ram_mb=1.0,
        cpu_cores_used=1.0,
        generation=summarize_generation(records, wall_s, generate),
    )
    return derive(raw, spec), spec


def _best_ms(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    table = {}
    for name, (m, spec) in (("tensor", _tensor()), ("generate", _generate())):
        packed = pack_body(m)
        table[name] = {
            "derive_ms": _best_ms(partial(derive, m, spec), rounds),
            "unpack_stored_ms": _best_ms(partial(unpack_body, packed, Measurement), rounds),
            "stored_bytes": len(packed),
        }
    print(f"{'result':<10} {'derive ms':>10} {'unpack ms':>10} {'ratio':>7} {'stored MB':>10}")
    for name, row in table.items():
        ratio = row["derive_ms"] / row["unpack_stored_ms"]
        line = f"{row['derive_ms']:>10.1f} {row['unpack_stored_ms']:>10.1f} {ratio:>7.1f}"
        print(f"{name:<10} {line} {row['stored_bytes'] / 1e6:>10.2f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
