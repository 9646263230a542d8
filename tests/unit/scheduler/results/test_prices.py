"""Performance per dollar and per watt: the campaign's `prices:`, the one seam that chooses and bounds a
row's price (the campaign's word before the owner's), the cost figures, their ranking and the diff."""

from __future__ import annotations

import math

import pytest

from protocol import ComputeUnit, EnergyFigures, GenerateSpec, Measurement, Prompt, RequestRecord, Stats
from protocol.genstats import summarize_generation
from scheduler.errors import CampaignError
from scheduler.language import PriceRule, parse_campaign
from scheduler.results import (
    Costs,
    Price,
    ReportEntry,
    cost_lines,
    costs_of,
    diff_entries,
    price_of,
    price_text,
)

SHA = "a" * 64
BASE = f"model: {{path: m.onnx, sha256: {SHA}}}\njobs: [{{compute_unit: CPU (ONNX)}}]\n"
CLS = "cls-1a2b3c4d" + "5e" * 28  # a class's whole id: cls- and 64 hex digits
RULES = (
    PriceRule(peer="12D3KooWpeerA", per_hour=0.5),
    PriceRule(device_class=CLS, per_hour=1.2),
)


def test_a_campaign_prices_peers_and_classes() -> None:
    campaign = parse_campaign(
        BASE + f"prices:\n  - {{peer: 12D3KooWpeerA, per_hour: 0.5}}\n  - {{class: {CLS}, per_hour: 1.2}}\n"
    )
    assert campaign.prices == RULES
    assert parse_campaign(BASE).prices == ()


@pytest.mark.parametrize(
    ("block", "path"),
    [
        ("[{per_hour: 1}]", "prices[0]"),
        (f"[{{peer: a, class: {CLS}, per_hour: 1}}]", "prices[0]"),
        ("[{class: cls-1a2b3c4d, per_hour: 1}]", "prices[0].class"),  # the short name: display only
        ("[{peer: 'a b', per_hour: 1}]", "prices[0].peer"),
        ("[{class: gpu, per_hour: 1}]", "prices[0].class"),
        ("[{peer: a, per_hour: -1}]", "prices[0].per_hour"),
        ("[{peer: a, per_hour: .nan}]", "prices[0].per_hour"),
        ("[{peer: a, per_hour: .inf}]", "prices[0].per_hour"),
        ("[{peer: a, per_hour: 1e308}]", "prices[0].per_hour"),
        ("[{peer: a, per_hour: true}]", "prices[0].per_hour"),
        ("[{peer: a, per_hour: 1, currency: EUR}]", "prices[0].currency"),
        ("[{peer: a, per_hour: 1}, {peer: a, per_hour: 2}]", "prices"),
        ("{peer: a}", "prices"),
    ],
)
def test_a_bad_price_is_a_problem_at_its_path(block: str, path: str) -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(BASE + f"prices: {block}\n")
    assert path in {p.path for p in caught.value.problems}


def test_the_campaigns_word_wins_a_peers_rule_before_its_classs() -> None:
    assert price_of(RULES, "12D3KooWpeerA", CLS, 9.0, 9.0) == Price(per_hour=0.5, source="campaign: peer")
    assert price_of(RULES, "other", CLS, 9.0, None) == Price(
        per_hour=1.2, source="campaign: class cls-1a2b3c4d"
    )
    assert price_of(RULES, "other", "cls-00000000", 2.0, 2.0) == Price(per_hour=2.0, source="owner")
    assert price_of(RULES, "other", "cls-00000000", None, None) is None


def test_a_class_shares_its_short_name_with_another_but_never_its_price() -> None:
    """Issue 50, scope 7: a profile ground to share the priced class's 8-digit name (about 2^32 hashes)
    is another class: the rule compares the whole id, so the collider keeps its owner's price."""
    collider = CLS[:12] + "0" * 56
    assert collider[:12] == CLS[:12]  # the same name in every table
    assert price_of(RULES, "other", collider, 2.0, None) == Price(per_hour=2.0, source="owner")


@pytest.mark.parametrize("lie", [-5.0, math.nan, math.inf, -math.inf, 1e308, 10_000.01])
def test_an_owners_absurd_price_is_refused_with_its_reason(lie: float) -> None:
    for advertised, said in ((lie, None), (None, lie), (1.0, lie), (lie, 1.0)):
        price = price_of((), "p", "", advertised, said)
        assert price is not None
        assert price.per_hour is None
        assert price.source.startswith("owner: refused: ")
        assert "outside 0..10000 per hour" in price.source


def test_an_owner_who_changes_its_price_is_costed_at_the_higher_word() -> None:
    price = price_of((), "p", "", 2.0, 0.01)
    assert price == Price(per_hour=2.0, source="owner: the higher of advertised 2, result's device 0.01")
    assert price_of((), "p", "", 0.0, 0.0) == Price(per_hour=0.0, source="owner")


def _tensor(median: float, joules: float | None = None) -> Measurement:
    stats = Stats(n=3, min=1, max=3, mean=2, median=median, stddev=1, p90=3, p95=3, p99=3, cv=0.5)
    energy = EnergyFigures(joules_per_inference=joules) if joules is not None else None
    return Measurement(
        compute_unit=ComputeUnit.CPU_ONNX,
        load_ms=stats,
        load_first_ms=4.0,
        first_inference_ms=3.0,
        warmups_used=1,
        inference_ms=stats,
        peak_load_ram_mb=10.0,
        peak_inference_ram_mb=11.0,
        cpu_cores_used=1.0,
        energy=energy,
    )


def _generation(tokens: int, wall_s: float) -> Measurement:
    spec = GenerateSpec(prompts=(Prompt(id="a", text="x"),), prompts_sha256="0" * 64)
    times = tuple(100.0 + 10.0 * k for k in range(tokens))
    record = RequestRecord(
        prompt_id="a",
        prompt_tokens=5,
        output_tokens=tokens,
        ttft_ms=100.0,
        e2e_ms=times[-1],
        token_times_ms=times,
    )
    stats = summarize_generation([record], wall_s, spec)
    energy = EnergyFigures(joules_per_token=0.25)
    return _tensor(1.0).with_(generation=stats, energy=energy)


def test_the_cost_figures_follow_their_formulas() -> None:
    costs = costs_of(_tensor(36.0, joules=0.5), Price(per_hour=2.0, source="owner"))
    assert costs.per_1k_inferences == pytest.approx(0.02)
    assert costs.inferences_per_joule == 2.0
    assert (costs.per_m_tokens, costs.tokens_per_joule) == (None, None)
    generated = _generation(100, 10.0)  # 10 output tok/s
    assert generated.generation is not None
    assert generated.generation.output_tok_per_s == pytest.approx(10.0)
    costs = costs_of(generated, Price(per_hour=3.6, source="owner"))
    assert costs.per_m_tokens == pytest.approx(100.0)
    assert costs.tokens_per_joule == 4.0
    assert costs.per_1k_inferences is None  # a generate task is costed per token


def test_no_price_or_no_figure_leaves_a_cost_empty_never_zero() -> None:
    assert costs_of(_tensor(36.0), None) == Costs()
    assert costs_of(_tensor(36.0), Price(source="owner: refused: x")) == Costs()
    assert costs_of(None, Price(per_hour=1.0)) == Costs()
    assert costs_of(_tensor(36.0, joules=-0.1), None) == Costs()  # a net energy under idle: no figure


def _entry(name: str, worker: str, costs: Costs, price: Price | None) -> ReportEntry:
    return ReportEntry(
        task_id=f"c-job-0-{name}",
        job_index=0,
        status="Complete",
        model="m.onnx",
        unit="CPU (ONNX)",
        device=name,
        worker=worker,
        median_ms=1.0,
        samples_ms=(1.0, 1.0),
        price=price,
        costs=costs,
    )


def test_cost_lines_rank_by_a_figure_the_best_first_and_the_unpriced_last() -> None:
    dear = _entry("dear", "w1", Costs(per_1k_inferences=0.5, inferences_per_joule=1.0), Price(per_hour=9.0))
    cheap = _entry("cheap", "w2", Costs(per_1k_inferences=0.1, inferences_per_joule=0.5), Price(per_hour=1.0))
    metered = _entry("metered", "w3", Costs(inferences_per_joule=3.0), None)
    bare = _entry("bare", "w4", Costs(), None)
    entries = (dear, metered, cheap, bare)
    assert [x.device for x in cost_lines(entries)] == ["dear", "metered", "cheap"]
    assert [x.device for x in cost_lines(entries, "per_1k_inferences")] == ["cheap", "dear", "metered"]
    assert [x.device for x in cost_lines(entries, "inferences_per_joule")] == ["metered", "dear", "cheap"]
    with pytest.raises(KeyError):
        cost_lines(entries, "latency")


def test_the_diff_shows_each_cost_with_both_prices_and_can_rank_by_one() -> None:
    a1 = _entry("box1", "w1", Costs(per_1k_inferences=0.5), Price(per_hour=1.0, source="owner"))
    b1 = a1.with_(costs=Costs(per_1k_inferences=0.25), price=Price(per_hour=0.5, source="campaign: peer"))
    a2 = _entry("box2", "w2", Costs(per_1k_inferences=0.1), Price(per_hour=1.0, source="owner"))
    b2 = a2.with_(costs=Costs(per_1k_inferences=0.2))
    rows = diff_entries([a1, a2], [b1, b2])
    costs = [r for r in rows if r.metric == "$ / 1k inferences"]
    assert [(r.device, r.verdict) for r in costs] == [("box1", "better"), ("box2", "worse")]
    assert "A 1 $/h (owner); B 0.5 $/h (campaign: peer)" in costs[0].note
    assert not any(r.significant for r in costs)  # a cost is not tested on its own
    ranked = diff_entries([a1, a2], [b2, b1], rank="per_1k_inferences")
    assert [r.device for r in ranked] == ["box2", "box2", "box1", "box1"]


def test_a_price_is_written_with_its_source() -> None:
    assert price_text(Price(per_hour=0.5, source="campaign: peer")) == "0.5 $/h (campaign: peer)"
    assert price_text(Price(source="owner: refused: advertised price -5.0")) == (
        "none (owner: refused: advertised price -5.0)"
    )
    assert price_text(None) == ""
