"""The submitter's intake child stopped at a limit: the campaign problem names the files it was checking
and the limit (the hostile files themselves are in tests/labs/e2e/test_hostile_files.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kit.extras import needs

import scheduler as sch
from node.errors import ChildNotStarted
from node.submitter import vetting

CAMPAIGN = """name: limits
model:
  path: m.onnx
jobs:
  - endpoint: {model: served}
    generate: {dataset: {sharegpt: chats.json}, tokenizer: tok/, max_new_tokens: 8}
"""


RANDOM_JOB = """  - endpoint: {model: served}
    generate:
      dataset: {random: {input_tokens: {mean: 16, stddev: 4}, output_tokens: {mean: 8}, seed: 5}}
      tokenizer: tok/
      max_new_tokens: 8
"""
MODEL = Path(__file__).resolve().parents[4] / "examples" / "models" / "tiny-convnet.onnx"


async def _problem(source: Path) -> str:
    with pytest.raises(sch.CampaignError) as info:
        await vetting.vet_local(CAMPAIGN, source)
    (problem,) = info.value.problems
    return str(problem)


async def test_a_child_past_its_deadline_names_the_files_and_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vetting, "CHILD", "tests.kit.badintake")
    monkeypatch.setattr(vetting, "VET_DEADLINE_S", 2.0)
    assert await _problem(tmp_path / "stall.yaml") == (
        "(file): checking tok/, chats.json, m.onnx stopped: it took more than 2 s (the limit)"
    )


async def test_a_child_killed_at_its_memory_or_cpu_cap_names_the_files_and_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vetting, "CHILD", "tests.kit.badintake")  # says it started, then SIGKILL
    assert await _problem(tmp_path / "c.yaml") == (
        "(file): checking tok/, chats.json, m.onnx stopped: it needed more than 3072 MiB of memory "
        "or 60 s of CPU (the limits; exit code -9)"
    )


async def test_a_child_that_cannot_start_is_said_so_not_blamed_on_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vetting, "CHILD", "node.no_such_module")  # what a broken install looks like
    with pytest.raises(ChildNotStarted) as info:
        await vetting.vet_local(CAMPAIGN, tmp_path / "c.yaml")
    assert info.value.what == "checks the campaign's files"
    assert "exit code 1" in info.value.why
    assert "No module named node.no_such_module" in info.value.why


@needs("tokenizers")
async def test_the_child_hands_back_the_campaign_the_parser_makes(tmp_path: Path) -> None:
    from kit.bpe import tokenizer_json

    from node.campaignfiles import read_prompt_files

    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_bytes(tokenizer_json())
    turns = [
        {"from": "human", "value": "Say hello to the quick brown fox"},
        {"from": "gpt", "value": "hello"},
    ]
    (tmp_path / "chats.json").write_text(json.dumps([{"conversations": turns}]))
    shutil.copy(MODEL, tmp_path / "m.onnx")
    text = CAMPAIGN + RANDOM_JOB
    vetted = await vetting.vet_local(text, tmp_path / "c.yaml")
    parsed = sch.parse_campaign(
        text, source=str(tmp_path / "c.yaml"), files=read_prompt_files(text, tmp_path)
    )
    assert vetted == parsed  # prompts, the tokenizer's compressed bytes and all
    generate = vetted.jobs[1].spec.generate
    assert generate is not None
    assert generate.tokenizer is not None
    assert generate.tokenizer.data
