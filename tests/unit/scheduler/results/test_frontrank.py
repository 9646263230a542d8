"""The campaign's ranking of its fronts (`scheduler.results.frontrank`, issue 51): each device's or
server's best eligible point at each swept length; verified before unchecked whatever the scores,
failed verification never ranked, ties sharing a rank, no eligible point listed with why."""

from __future__ import annotations

from scheduler.language import Rank
from scheduler.results import CampaignReport, Front, FrontPoint, ranking_of
from scheduler.results.frontrank import Standing, tier_of

BOUND = Rank(ttft_ms=500, at="p90")


def _p(load: str, tok_s: float, ttft: float | None, verified: str = "single", **more: object) -> FrontPoint:
    bounded = {} if ttft is None else {"ttft_ms": ttft}
    return FrontPoint.model_validate(
        {"job_id": load, "load": load, "throughput": tok_s, "latency_ms": 100.0, "verified": verified,
         "bounded": bounded, **more}
    )  # fmt: skip


def _front(target: str, *points: FrontPoint, i: int | None = 128, failed: int = 0) -> Front:
    return Front(target=target, input_tokens=i, output_tokens=32, points=points, failed=failed)


def _placed(rank: Rank, *fronts: Front) -> list[tuple[str, int | None, float | None, str]]:
    ranking = ranking_of(rank, fronts)
    assert ranking is not None
    return [(s.target, s.rank, s.score, s.load) for s in ranking.standings]


def test_each_target_scores_its_best_point_within_the_bound() -> None:
    a = _front("a", _p("c1", 100, 200), _p("c4", 300, 450), _p("c16", 900, 1200))  # c16 over the bound
    b = _front("b", _p("c1", 120, 100), _p("c4", 250, 300))
    assert _placed(BOUND, a, b) == [("a", 1, 300, "c4"), ("b", 2, 250, "c4")]


def test_a_verified_point_ranks_above_an_unchecked_one_whatever_the_scores() -> None:
    cheap = _front("claims", _p("c4", 5000, 100, verified="single"))
    honest = _front("checked", _p("c4", 200, 100, verified="replicated 2/2"))
    ranking = ranking_of(BOUND, [cheap, honest])
    assert ranking is not None
    assert [(s.target, s.rank, s.tier) for s in ranking.standings] == [
        ("checked", 1, "verified"),
        ("claims", 2, "unchecked"),
    ]
    # within one target too: the verified point stands for it, not a faster unchecked one
    mixed = _front("mixed", _p("c1", 100, 100, verified="replicated 2/2"), _p("c8", 800, 100))
    assert _placed(BOUND, mixed) == [("mixed", 1, 100, "c1")]


def test_failed_verification_never_ranks_and_says_why() -> None:
    bad = _front("bad", _p("c4", 9000, 10, verified="outlier: 3.1x the agreed figure"))
    ranking = ranking_of(BOUND, [bad, _front("ok", _p("c1", 10, 10))])
    assert ranking is not None
    ok, out = ranking.standings
    assert (ok.target, ok.rank) == ("ok", 1)
    assert out.rank is None
    assert out.score is None
    assert out.why == "no eligible point: c4: verification failed (outlier: 3.1x the agreed figure)"


def test_ties_share_a_rank_and_the_next_is_skipped() -> None:
    fronts = [_front(t, _p("c1", s, 100)) for t, s in (("x", 50), ("a", 100), ("b", 100))]
    assert [(t, r) for t, r, _, _ in _placed(BOUND, *fronts)] == [("a", 1), ("b", 1), ("x", 3)]


def test_missing_points_and_failed_tasks_are_listed_unranked_with_why() -> None:
    none = _front("down", failed=2)
    unmeasured = _front("tpot-less", _p("c1", 100, None))
    over = _front("slow", _p("c1", 100, 600), _p("c2", 150, 700), _p("c4", 1, 800), _p("c8", 1, 900))
    ranking = ranking_of(BOUND, [none, unmeasured, over])
    assert ranking is not None
    why = {s.target: s.why for s in ranking.standings}
    assert all(s.rank is None for s in ranking.standings)
    assert why["down"] == "no eligible point: 2 task(s) failed"
    assert why["tpot-less"] == "no eligible point: c1: TTFT p90 not measured"
    assert why["slow"].startswith("no eligible point: c1: TTFT p90 600.0 ms over 500 ms; c2: ")
    assert why["slow"].endswith("; ...")  # three points named, the rest counted out


def test_each_swept_length_ranks_on_its_own_and_unranked_come_last() -> None:
    fronts = [
        _front("a", _p("c1", 10, 900), i=128),
        _front("b", _p("c1", 20, 100), i=128),
        _front("a", _p("c1", 30, 100), i=1024),
    ]
    ranking = ranking_of(BOUND, fronts)
    assert ranking is not None
    assert [(s.input_tokens, s.target, s.rank) for s in ranking.standings] == [
        (128, "b", 1),
        (128, "a", None),
        (1024, "a", 1),
    ]


def test_error_share_and_goodput() -> None:
    errors = Rank(e2e_ms=1000, max_error_pct=5)
    flaky = _front("flaky", _p("c8", 900, None, error_share=0.2, bounded={"e2e_ms": 200}))
    assert ranking_of(errors, [flaky]).standings[0].why == "no eligible point: c8: error share 20.0% over 5 %"  # type: ignore[union-attr]
    goodput = Rank(by="goodput")
    fronts = [_front("g", _p("c1", 500, None, goodput_per_s=3.5), _p("c4", 900, None, goodput_per_s=2.0)),
              _front("none", _p("c1", 500, None))]  # fmt: skip
    ranking = ranking_of(goodput, fronts)
    assert ranking is not None
    assert ranking.score == "requests/s within the SLO"
    assert next((s.target, s.rank, s.score, s.load) for s in ranking.standings) == ("g", 1, 3.5, "c1")
    assert ranking.standings[1].why == "no eligible point: c1: no goodput (the job set no generate.slo)"


def test_tiers_and_no_rank() -> None:
    said = ("replicated 2/3", "single", "pending", "", "disagreed: x", "unverifiable")
    assert [tier_of(v) for v in said] == [
        "verified", "unchecked", "unchecked", "unchecked", None, None
    ]  # fmt: skip
    assert ranking_of(None, [_front("a", _p("c1", 1, 1))]) is None


def test_the_ranking_survives_results_json() -> None:
    ranking = ranking_of(BOUND, [_front("a", _p("c1", 10, 10))])
    assert ranking is not None
    field = CampaignReport.model_fields["ranking"]
    assert field.annotation is not None
    again = type(ranking).model_validate_json(ranking.model_dump_json())
    assert again == ranking
    assert isinstance(again.standings[0], Standing)
