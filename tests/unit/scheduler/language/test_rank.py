"""A campaign's `rank:` block (issue 51): what the fronts are ranked by, refused where it cannot rank."""

from __future__ import annotations

import pytest

import scheduler as sch
from scheduler.errors import CampaignError
from scheduler.language import Rank

CAMPAIGN = """
name: ranked
jobs:
  - endpoint: {url: http://127.0.0.1:9/v1, model: tiny}
    generate:
      prompts: builtin:summaries
      concurrency: [1, 4]
%s
rank: %s
"""


def _rank(rank: str, slo: str = "") -> Rank | None:
    return sch.parse_campaign(CAMPAIGN % (slo, rank)).rank


def test_a_throughput_rank_keeps_its_bounds_and_percentile() -> None:
    rank = _rank("{by: throughput, at: p90, ttft_ms: 500, tpot_ms: 40, max_error_pct: 1}")
    assert rank is not None
    assert rank.bounds() == {"ttft_ms": 500.0, "tpot_ms": 40.0}
    assert rank.says() == "output tok/s at TTFT p90 <= 500 ms and TPOT p90 <= 40 ms, error share <= 1 %"


def test_goodput_reads_the_jobs_slo() -> None:
    rank = _rank("{by: goodput}", slo="      slo: {ttft_ms: 800}")
    assert rank is not None
    assert rank.by == "goodput"
    assert rank.bounds() == {}


def test_no_rank_is_none() -> None:
    assert sch.parse_campaign((CAMPAIGN % ("", "{}")).replace("rank: {}", "")).rank is None


@pytest.mark.parametrize(
    ("rank", "path", "says"),
    [
        ("{by: throughput}", "rank", "needs a latency bound"),
        ("{by: speed, e2e_ms: 10}", "rank.by", "expected one of throughput, goodput"),
        ("{at: p75, e2e_ms: 10}", "rank.at", "expected one of median, p90, p99"),
        ("{ttft_ms: -1}", "rank.ttft_ms", "above 0"),
        ("{ttft_ms: .inf}", "rank.ttft_ms", "above 0"),
        ("{ttft_ms: true}", "rank.ttft_ms", "above 0"),
        ("{e2e_ms: 5, max_error_pct: 101}", "rank.max_error_pct", "from 0 to 100"),
        ("{by: goodput, ttft_ms: 5}", "rank", "is for by: throughput"),
        ("{by: goodput}", "rank.by", "goodput needs a generate job with an slo"),
        ("{e2e_ms: 5, ttft: 5}", "rank.ttft", "did you mean ttft_ms"),
        ("[1, 2]", "rank", "expected a mapping"),
    ],
)
def test_a_rank_that_cannot_rank_is_refused_at_its_path(rank: str, path: str, says: str) -> None:
    with pytest.raises(CampaignError) as caught:
        _rank(rank)
    found = [(p.path, p.problem) for p in caught.value.problems]
    assert any(p == path and says in problem for p, problem in found), found
