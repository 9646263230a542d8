"""Generate jobs in campaign files: prompts from JSONL bytes or the built-in set, problems at their path."""

from __future__ import annotations

import pytest

import scheduler as sch
from scheduler.language import builtin_prompts, parse_jsonl, take

CAMPAIGN = """
name: smollm
model: {path: ./smol.gguf}
jobs:
  - compute_unit: CPU (PyTorch)
    generate: {prompts: %s, num_prompts: %d, max_new_tokens: %s, ignore_eos: true}
    quality: [rouge]
"""
JSONL = b'{"prompt": "one", "reference": "1"}\n\n{"prompt": "two", "id": "t"}\n'


def _problems(text: str, files: dict[str, bytes] | None = None) -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        sch.parse_campaign(text, files=files)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


def test_builtin_summaries_cycled_and_pinned() -> None:
    campaign = sch.parse_campaign(CAMPAIGN % ("builtin:summaries", 25, 32))
    assert campaign.models[0].format.value == "gguf"
    spec = campaign.jobs[0].spec
    gen = spec.generate
    assert gen is not None
    assert len(gen.prompts) == 25
    assert gen.prompts[20].id == "summaries-01#2"
    assert gen.prompts[20].text == gen.prompts[0].text
    assert gen.prompts_sha256 == builtin_prompts("summaries")[1]
    assert gen.max_new_tokens == 32
    assert gen.ignore_eos
    assert gen.quality == ("rouge",)
    assert (spec.load_runs, spec.warmups) == (2, 1)  # a generate job's defaults
    assert len(builtin_prompts("summaries")[0]) == 20
    assert all(p.reference for p in builtin_prompts("summaries")[0])


def test_jsonl_prompts_taken_from_files() -> None:
    text = CAMPAIGN % ("prompts.jsonl", 1, 8)
    assert sch.campaign_files(text) == ["prompts.jsonl"]
    gen = sch.parse_campaign(text, files={"prompts.jsonl": JSONL}).jobs[0].spec.generate
    assert gen is not None
    assert [(p.id, p.text, p.reference) for p in gen.prompts] == [("line-1", "one", "1")]
    assert gen.prompts_source == "prompts.jsonl"


def test_bad_lines_named_by_number() -> None:
    prompts, problems = parse_jsonl(
        b'{"prompt": "ok"}\n{"prompt": 3}\nnot json\n{"prompt": "x", "extra": 1}\n', "p"
    )
    assert len(prompts) == 1
    assert [p.split(":")[0] for p in problems] == ["line 2", "line 3", "line 4"]
    listed = _problems(CAMPAIGN % ("p.jsonl", 1, 8), {"p.jsonl": b'{"prompt": "a"}\n{bad\n'})
    assert len(listed) == 1
    assert listed[0].startswith("jobs[0].generate.prompts: p.jsonl: line 2: not JSON")


@pytest.mark.parametrize(
    ("prompts", "count", "tokens", "path"),
    [
        ("missing.jsonl", 1, 8, "jobs[0].generate.prompts"),
        ("builtin:nothing", 1, 8, "jobs[0].generate.prompts"),
        ("builtin:summaries", 0, 8, "jobs[0].generate.num_prompts"),
        ("builtin:summaries", 1, 0, "jobs[0].generate.max_new_tokens"),
        ("builtin:summaries", 1, 100000, "jobs[0].generate.max_new_tokens"),
        ("builtin:summaries", 1, '"many"', "jobs[0].generate.max_new_tokens"),
    ],
)
def test_bad_generate_fields(prompts: str, count: int, tokens: object, path: str) -> None:
    problems = _problems(CAMPAIGN % (prompts, count, tokens))
    assert [p.split(": ")[0] for p in problems] == [path]


def test_quality_needs_generate_and_known_metrics() -> None:
    plain = "model: {path: m.onnx}\njobs:\n  - compute_unit: CPU (ONNX)\n    quality: [rouge]\n"
    assert [p.split(": ")[0] for p in _problems(plain)] == ["jobs[0].quality"]
    odd = (CAMPAIGN % ("builtin:summaries", 1, 8)).replace("[rouge]", "[bleu]")
    assert [p.split(": ")[0] for p in _problems(odd)] == ["jobs[0].quality"]


def test_take_without_count_keeps_all() -> None:
    prompts = builtin_prompts("summaries")[0]
    assert take(prompts, None) == prompts
    assert take(prompts, 3) == prompts[:3]
