"""Campaign text that tries to cost the submitter memory or time: alias bombs, recursion, deep nesting,
huge sweeps. Each is refused with a problem that names why, before its value is built."""

from __future__ import annotations

import tracemalloc

import pytest
from kit.badfiles import BILLION_LAUGHS

from scheduler import CampaignError, parse_campaign
from scheduler.language import DocumentError, load_document
from scheduler.language.document import MAX_NODES
from scheduler.language.problems import describe


def _problems(text: str) -> list[str]:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text)
    return [str(p) for p in caught.value.problems]


def test_a_billion_laughs_is_refused_without_building_it() -> None:
    assert len(BILLION_LAUGHS) < 500
    tracemalloc.start()
    try:
        problems = _problems(BILLION_LAUGHS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(problems) == 1
    assert f"more than {MAX_NODES} values" in problems[0]
    assert "alias" in problems[0]
    assert peak < 20 * 1024 * 1024  # the expanded value would be gigabytes


def test_a_recursive_alias_is_refused() -> None:
    [problem] = _problems("jobs: &j [1, *j]\nmodel: {path: m.onnx}\n")
    assert "recursive alias" in problem


def test_deep_nesting_is_refused_in_yaml_and_json() -> None:
    assert "nested too deep" in _problems("jobs: " + "[" * 5000 + "]" * 5000)[0]
    assert "nested too deep" in _problems('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")[0]


def test_an_oversized_file_is_refused_before_parsing() -> None:
    with pytest.raises(DocumentError, match="at most"):
        load_document("#" * (2 << 20))


def test_honest_aliases_still_work() -> None:
    text = """
model: {path: m.onnx}
defaults: &cpu {compute_unit: CPU (ONNX), num_inference_runs: 5}
jobs:
  - *cpu
  - {<<: *cpu, warmup_runs: 2}
"""
    # `defaults` is an unknown top-level field: the one problem, the aliases themselves are fine
    assert [p.split(":")[0] for p in _problems(text)] == ["defaults"]
    data = load_document(text)
    assert isinstance(data, dict)
    assert data["jobs"][1] == {"compute_unit": "CPU (ONNX)", "num_inference_runs": 5, "warmup_runs": 2}


def test_a_sweep_that_multiplies_past_the_cap_is_refused() -> None:
    values = "[" + ",".join(str(i) for i in range(1, 31)) + "]"
    sweep = ", ".join(f"{f}: {values}" for f in ("num_inference_runs", "warmup_runs", "load_runs"))
    text = f"model: {{path: m.onnx}}\njobs:\n  - {{compute_unit: CPU (ONNX), sweep: {{{sweep}}}}}\n"
    [problem] = _problems(text)
    assert "expands to 27000 jobs" in problem


def test_describe_is_bounded_before_it_is_built() -> None:
    shared: object = ["lol"] * 10
    for _ in range(8):
        shared = [shared] * 10  # 10^9 leaves, all shared: a full repr would never finish
    text = describe(shared)
    assert len(text) <= 70
    assert text.startswith("list [")
