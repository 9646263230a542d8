"""llama.cpp: the harness's white-box figures against llama.cpp's own timers, in the same runs.

Each round is one `drivers.measure` of a generate task on `CPU (llama.cpp)` (spawned child, the
packaged SmolLM2-135M-Instruct Q4_1 GGUF, builtin:summaries prompts through the model's chat
template, greedy, `--tokens` new tokens each: ignore_eos). The harness times every token on its own
clock (`time.perf_counter_ns` around `llama_decode` + sampling); llama.cpp times its own evaluation
(`llama_perf_context`, reset before the timed requests), as llama-bench reports pp and tg. Per round:

- pooled like llama.cpp's timers (the like-for-like pair): the harness's mean TTFT against
  llama.cpp's prompt evaluation time per request, and the harness's decode time per token (sum of
  E2E - TTFT over sum of n - 1) against llama.cpp's (t_eval / n_eval);
- decode: the row's decode tok/s (median over requests of (n - 1) / (E2E - TTFT)) against
  llama.cpp's tg tok/s (tokens decoded one at a time / their evaluation time), and the harness's TPOT
  against llama.cpp's ms per generated token (1000 / tg);
- prefill: the row's TTFT (median) against llama.cpp's prompt evaluation time per request
  (t_p_eval / requests), and prefill tok/s against pp tok/s.

The harness's side includes sampling and the Python around each call; llama.cpp's covers its graph
evaluation only: the gap is what a row's TTFT and TPOT add to llama-bench's figures. Writes
benchmarks/out/llamacpp_timers.json.

    .venv/bin/python benchmarks/llamacpp_timers.py [--rounds 5] [--prompts 8] [--tokens 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # spawned children too: the packages of this checkout

from drivers import measure  # noqa: E402
from drivers.files.models import packaged_llm  # noqa: E402
from protocol import ComputeUnit, GenerateSpec, TaskSpec  # noqa: E402
from scheduler.language import builtin_prompts, take  # noqa: E402


def one_round(model: Path, spec: TaskSpec) -> dict[str, float]:
    """One measured task's harness figures and llama.cpp's timers."""
    gen = measure(model, spec).generation
    assert gen is not None
    timers = gen.runtime_rates
    assert timers is not None
    pp, tg = timers.pp_tok_per_s(), timers.tg_tok_per_s()
    assert pp is not None
    assert tg is not None
    ok = [r for r in gen.records if r.ttft_ms is not None and r.output_tokens > 1]
    decoding_ms = sum(r.e2e_ms - (r.ttft_ms or 0.0) for r in ok)
    return {
        # pooled like llama.cpp's timers (sums over the requests): the like-for-like pair
        "harness_ttft_ms_mean": sum(r.ttft_ms or 0.0 for r in ok) / len(ok),
        "harness_ms_per_token_pooled": decoding_ms / sum(r.output_tokens - 1 for r in ok),
        # the row's own figures (medians over requests)
        "harness_ttft_ms": gen.ttft_ms.median,
        "llama_prompt_ms_per_request": timers.prompt_ms / gen.requests,
        "harness_prefill_tok_per_s": gen.prefill_tok_per_s,
        "llama_pp_tok_per_s": pp,
        "harness_tpot_ms": gen.tpot_ms.median,
        "llama_ms_per_token": 1000 / tg,
        "harness_decode_tok_per_s": gen.decode_tok_per_s,
        "llama_tg_tok_per_s": tg,
        "prompt_tokens_mean": gen.prompt_tokens_mean,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    builtin, digest = builtin_prompts("summaries")
    generate = GenerateSpec(
        prompts=take(builtin, args.prompts),
        prompts_sha256=digest,
        max_new_tokens=args.tokens,
        ignore_eos=True,
    )
    spec = TaskSpec(
        compute_unit=ComputeUnit.CPU_LLAMACPP,
        load_runs=1,
        warmups=1,
        threads=args.threads,
        timeout_s=900,
        generate=generate,
    )
    model = packaged_llm()
    rounds = []
    for i in range(args.rounds):
        rounds.append(one_round(model, spec) | {"load_average": os.getloadavg()[0]})
        print(f"round {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in rounds[-1].items()), flush=True)
    pairs = [
        ("TTFT ms mean", "harness_ttft_ms_mean", "llama_prompt_ms_per_request"),
        ("ms/token pool", "harness_ms_per_token_pooled", "llama_ms_per_token"),
        ("TTFT ms", "harness_ttft_ms", "llama_prompt_ms_per_request"),
        ("prefill tok/s", "harness_prefill_tok_per_s", "llama_pp_tok_per_s"),
        ("TPOT ms", "harness_tpot_ms", "llama_ms_per_token"),
        ("decode tok/s", "harness_decode_tok_per_s", "llama_tg_tok_per_s"),
    ]
    summary: dict[str, Any] = {}
    print(f"{'figure':<14} {'harness':>10} {'llama.cpp':>10} {'ratio (median, range)':>28}")
    for label, ours, theirs in pairs:
        ratios = [r[ours] / r[theirs] for r in rounds]
        row = {
            "harness": statistics.median(r[ours] for r in rounds),
            "llama_cpp": statistics.median(r[theirs] for r in rounds),
            "ratio_median": statistics.median(ratios),
            "ratio_range": [min(ratios), max(ratios)],
        }
        summary[label] = row
        spread = f"{row['ratio_median']:.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        print(f"{label:<14} {row['harness']:>10.2f} {row['llama_cpp']:>10.2f} {spread:>28}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    document = {"args": vars(args), "rounds": rounds, "summary": summary, "model": model.name}
    (out / "llamacpp_timers.json").write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
