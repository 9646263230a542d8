"""The submitter's intake child stopped at a limit: the campaign problem names the files it was checking
and the limit (the hostile files themselves are in tests/e2e/test_hostile_files.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import scheduler as sch
from node.submitter import vetting

CAMPAIGN = """name: limits
model:
  path: m.onnx
jobs:
  - endpoint: {model: served}
    generate: {dataset: {sharegpt: chats.json}, tokenizer: tok/, max_new_tokens: 8}
"""


def _problem(source: Path) -> str:
    with pytest.raises(sch.CampaignError) as info:
        vetting.vet_local(CAMPAIGN, source)
    (problem,) = info.value.problems
    return str(problem)


def test_a_child_past_its_deadline_names_the_files_and_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vetting, "CHILD", (sys.executable, "-c", "import time; time.sleep(30)"))
    monkeypatch.setattr(vetting, "VET_DEADLINE_S", 0.5)
    assert _problem(tmp_path / "c.yaml") == (
        "(file): checking tok/, chats.json, m.onnx stopped: it took more than 0.5 s (the limit)"
    )


def test_a_child_killed_at_its_memory_or_cpu_cap_names_the_files_and_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"  # what RLIMIT_CPU's end looks like
    monkeypatch.setattr(vetting, "CHILD", (sys.executable, "-c", killed))
    assert _problem(tmp_path / "c.yaml") == (
        "(file): checking tok/, chats.json, m.onnx stopped: it needed more than 3072 MiB of memory "
        "or 60 s of CPU (the limits; exit code -9)"
    )
