"""Each other tool's results layout, read into `ImportedRow`s (`sark-node import TOOL FILE`).

Read from the tools' own files as their PyPI releases write them (tests/golden/imports/, made by
`kit.toolfiles` against a loopback server; made.json there names each version and command):

    guidellm     `guidellm run --output kind=json` (0.8): benchmarks.json, one row per benchmark (a
                 strategy at one load), its `metrics.<name>.successful` median or mean
    aiperf       `aiperf profile` (0.13): profile_export_aiperf.json, one row, each metric's p50 (avg
                 where the metric has one value) with the unit AIPerf gives
    vllm         `vllm bench serve --save-result` (0.33): one row, its median_<metric>_ms for each
                 latency it kept (ttft, tpot, itl, e2el, as --percentile-metrics chose) and its throughputs
    llama-bench  `llama-bench -o json`: one row per test (pp or tg at a thread count), avg_ts and
                 stddev_ts in tokens per second
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Final

from scheduler.results.imported import (
    Figure,
    ImportedRow,
    Malformed,
    Unreadable,
    field,
    items,
    number,
    parse_json,
    short,
    text,
)

GUIDELLM_FIGURES: Final = (
    ("time_to_first_token_ms", "median", "ms"),
    ("inter_token_latency_ms", "median", "ms"),
    ("time_per_output_token_ms", "median", "ms"),
    ("request_latency", "median", "s"),
    ("output_tokens_per_second", "mean", "tok/s"),
    ("requests_per_second", "mean", "req/s"),
)
"""GuideLLM's metrics kept (name, statistic, unit: GuideLLM's names say ms; the others are its seconds)."""
AIPERF_FIGURES: Final = (
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
    "output_token_throughput_per_user",
    "output_token_throughput",
    "request_throughput",
)
"""AIPerf's metrics kept, by its tags."""
VLLM_LATENCIES: Final = ("ttft", "tpot", "itl", "e2el")
"""vLLM's latencies, each kept as its `median_<name>_ms` where the file has it."""
VLLM_RATES: Final = (
    ("request_throughput", "req/s"),
    ("output_throughput", "tok/s"),
    ("total_token_throughput", "tok/s"),
)
"""vLLM's throughputs kept, with the units its console report gives them."""
LLAMA_BENCH_FIGURES: Final = (("avg_ts", "t/s"), ("stddev_ts", "t/s"))
"""llama-bench's figures kept: the mean tokens per second of its repetitions and their spread."""


def guidellm_rows(doc: object, source: str) -> list[ImportedRow]:
    """GuideLLM's benchmarks.json: one row per benchmark."""
    version = text(doc, "metadata", "guidellm_version", default="")
    rows = []
    for bench in items(doc, "benchmarks"):
        backend = field(bench, "config", "backend")
        strategy = field(bench, "config", "strategy")
        kind = text(strategy, "type_")
        load = " ".join(
            f"{k}={text(strategy, k)}"
            for k in ("streams", "rate")
            if text(strategy, k, default="") not in {"", "None"}
        )
        metrics = field(bench, "metrics")
        figures = tuple(
            Figure(f"{name} {stat}", number(metrics, name, "successful", stat), unit)
            for name, stat, unit in GUIDELLM_FIGURES
        )
        rows.append(
            ImportedRow(
                tool="guidellm",
                version=version,
                model=text(backend, "model"),
                target=text(backend, "target"),
                setting=f"{kind} {load}".strip(),
                figures=figures,
                requests=f"{number(metrics, 'request_totals', 'successful'):.0f}",
                source=source,
            )
        )
    return rows


def aiperf_rows(doc: object, source: str) -> list[ImportedRow]:
    """AIPerf's profile_export_aiperf.json: one row, its metrics' p50 (avg for a one-value metric)."""
    config = field(doc, "input_config")
    models = items(config, "models", "items")
    urls = items(config, "endpoint", "urls")
    phases = [p for p in items(config, "phases") if text(p, "kind", default="") == "profiling"]
    load = " ".join(
        f"{k}={text(phase, k)}"
        for phase in phases[:1]
        for k in ("type", "concurrency", "request_rate")
        if text(phase, k, default="") not in {"", "None"}
    )
    figures = []
    for tag in AIPERF_FIGURES:
        metric = field(doc, tag)
        stat = "p50" if isinstance(metric, dict) and "p50" in metric else "avg"
        figures.append(Figure(f"{tag} {stat}", number(metric, stat), text(metric, "unit")))
    return [
        ImportedRow(
            tool="aiperf",
            version=text(doc, "aiperf_version", default=""),
            model=", ".join(text(m, "name") for m in models[:4]),
            target=", ".join(short(str(u)) for u in urls[:4]),
            setting=f"{text(config, 'endpoint', 'type', default='')} {load}".strip(),
            figures=tuple(figures),
            requests=f"{number(doc, 'completed_request_count', 'avg'):.0f}",
            source=source,
        )
    ]


def vllm_rows(doc: object, source: str) -> list[ImportedRow]:
    """vLLM's `bench serve` result JSON: one row; the file names no vLLM version."""
    latencies = [
        Figure(f"median_{name}_ms", number(doc, f"median_{name}_ms"), "ms")
        for name in VLLM_LATENCIES
        if isinstance(doc, dict) and f"median_{name}_ms" in doc
    ]
    if not latencies:
        raise Malformed("no median_<metric>_ms")
    rates = [Figure(name, number(doc, name), unit) for name, unit in VLLM_RATES]
    concurrency = text(doc, "max_concurrency", default="")
    load = f"request_rate={text(doc, 'request_rate')} max_concurrency={concurrency}"
    return [
        ImportedRow(
            tool="vllm",
            version="",
            model=text(doc, "model_id"),
            target=text(doc, "backend"),
            setting=f"{text(doc, 'endpoint_type', default='')} {load}".strip(),
            figures=(*latencies, *rates),
            requests=f"{number(doc, 'completed'):.0f}",
            source=source,
        )
    ]


def llama_bench_rows(doc: object, source: str) -> list[ImportedRow]:
    """llama-bench's `-o json`: one row per test; pp<n> for a prompt test, tg<n> for a generation."""
    rows = []
    for test in items(doc):
        n_prompt, n_gen = number(test, "n_prompt"), number(test, "n_gen")
        test_name = " ".join(
            part
            for part in (f"pp{n_prompt:.0f}" if n_prompt else "", f"tg{n_gen:.0f}" if n_gen else "")
            if part
        )
        rows.append(
            ImportedRow(
                tool="llama-bench",
                version=f"{text(test, 'build_commit')} ({text(test, 'build_number')})",
                model=PurePosixPath(text(test, "model_filename")).name + f" ({text(test, 'model_type')})",
                target=f"{text(test, 'cpu_info')} · {text(test, 'backends')}",
                setting=f"{test_name} threads={number(test, 'n_threads'):.0f}",
                figures=tuple(Figure(name, number(test, name), unit) for name, unit in LLAMA_BENCH_FIGURES),
                requests="",
                source=source,
            )
        )
    return rows


TOOLS: Final[Mapping[str, Callable[[object, str], list[ImportedRow]]]] = {
    "guidellm": guidellm_rows,
    "aiperf": aiperf_rows,
    "vllm": vllm_rows,
    "llama-bench": llama_bench_rows,
}
"""The tools whose files `sark-node import` reads, by name."""


def read_tool_file(tool: str, data: bytes, source: str) -> tuple[ImportedRow, ...] | Unreadable:
    """A tool file's rows, or why it gives none (the file, the stage, the cause)."""
    reader = TOOLS.get(tool)
    if reader is None:
        return Unreadable(source, "choosing the reader", f"no tool {tool!r}; one of {', '.join(TOOLS)}")
    try:
        doc = parse_json(data)
    except Malformed as exc:
        return Unreadable(source, "parsing the JSON", str(exc))
    try:
        rows = reader(doc, source)
    except Malformed as exc:
        return Unreadable(source, f"reading {tool}'s layout", str(exc))
    if not rows:
        return Unreadable(source, f"reading {tool}'s layout", "no result in the file")
    return tuple(rows)
