"""`generate.sweep` (issue 51): input and output lengths of a random dataset swept, one job per point
and load level, each job's label and spec saying its point; refused where lengths are not exact."""

from __future__ import annotations

import json

import pytest
from kit.bpe import tokenizer_json

import scheduler as sch

CAMPAIGN = """
name: sweep
jobs:
  - endpoint: {url: http://127.0.0.1:9/v1, model: tiny}
    generate:
      tokenizer: tok
      dataset: %s
      sweep: %s
      num_prompts: 4
      request_rate: [2, 8]
"""
RANDOM = {"random": {"input_tokens": {"mean": 20, "stddev": 2}, "output_tokens": {"mean": 8}, "seed": 1}}


def _jobs(dataset: object, sweep: object) -> list[sch.Job]:
    text = CAMPAIGN % (json.dumps(dataset), json.dumps(sweep))
    return list(sch.parse_campaign(text, files={"tok": tokenizer_json(), "c.json": b"[]"}).jobs)


def test_each_point_and_level_is_a_job_whose_prompts_have_the_points_lengths() -> None:
    jobs = _jobs(RANDOM, {"input_tokens": [16, 64], "output_tokens": [4, 32]})
    assert len(jobs) == 2 * 2 * 2
    seen = []
    for job in jobs:
        g = job.spec.generate
        assert g is not None
        seen.append((g.sweep_input_tokens, g.sweep_output_tokens, g.request_rate))
        assert f"input_tokens={g.sweep_input_tokens} output_tokens={g.sweep_output_tokens}" in job.label
        inputs = [p.input_tokens or 0 for p in g.prompts]
        assert abs(sum(inputs) / len(inputs) - (g.sweep_input_tokens or 0)) <= 4  # stddev 2 kept
        assert all(p.output_tokens == g.sweep_output_tokens for p in g.prompts)
    assert seen == [(i, o, r) for i in (16, 64) for o in (4, 32) for r in (2.0, 8.0)]


@pytest.mark.parametrize(
    ("dataset", "sweep", "words"),
    [
        ({"sharegpt": "c.json"}, {"input_tokens": [16]}, "needs a random dataset"),
        (RANDOM, {"lengths": [16]}, "expected a mapping of input_tokens"),
        (RANDOM, {"input_tokens": []}, "expected a list of token lengths"),
        (RANDOM, {"input_tokens": [0]}, "expected a list of token lengths"),
        (RANDOM, {"input_tokens": list(range(1, 10)), "output_tokens": list(range(1, 10))}, "at most 64"),
    ],
)
def test_a_sweep_without_exact_lengths_or_with_bad_ones_is_refused(
    dataset: object, sweep: object, words: str
) -> None:
    with pytest.raises(sch.CampaignError) as info:
        _jobs(dataset, sweep)
    assert any(words in p.problem for p in info.value.problems), info.value.problems
