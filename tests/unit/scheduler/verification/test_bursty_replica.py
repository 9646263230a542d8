"""A replica whose one process a burst of other work slowed whole still vouches for a figure the burst
did not move; one whose figure's own processes scatter still cannot; a liar gains nothing.

The figures are the ones README's one-machine lab measured beside a bursty load (`kit.load.Bursts(4)`,
2 cores, 2026-11-26): worker A's process medians 1.63, 6.25 and 1.56 ms (its second process ran
inside a burst), worker B's figure 1.571 ms. Before, A's whole spread (119 %) was over 4x the
class's (PRIOR at 3 processes, 5.4 %): A "cannot vouch", the pair settled `disagreed`, and README's
recipe got no verified figure. Its figure rests on 1.63 and 1.56 (`agreement.core_spread`).

The other end: a class whose processes time alike to a hundredth of a percent (the labs' paced
workload: CI-equivalent at 087e4b8, an honest replica of 10.1 ms whose processes were 0.2 % apart
"cannot vouch" against its class's 0.0 %) bars no replica for a scatter far inside the band
(`agreement.vouching_limit`: FAR times the class's spread, never under FAR times the board's).
"""

from __future__ import annotations

import math

from kit.scheduler_harness import KEY, MODEL, SHA, peer

from scheduler import (
    OfferCommitted,
    PeersDiscovered,
    ReplicasSettled,
    ResultAccepted,
    Scheduler,
    SendOffer,
    parse_campaign,
)
from scheduler.verification.agreement import (
    BOARD,
    FAR,
    POOL_MIN,
    PRIOR,
    Outcome,
    Replica,
    barred,
    core_spread,
    pooled_spread,
    process_error,
    settle,
    spread_of,
    vouching_limit,
)

CLASS = PRIOR / math.sqrt(3)
"""A fresh class's spread at 3 processes (5.4 %): the lab's."""
BURST = (1.630862, 6.253528, 1.5604475)
"""Worker A's process medians in the lab: the second inside a burst."""
CALM = (1.571, 1.566, 1.583)
"""Worker B's (its figure 1.571 ms, as the lab's row showed)."""


def _replica(name: str, medians: tuple[float, ...]) -> Replica:
    return Replica(name, sorted(medians)[1], spread_of(medians), "fp", core_spread(medians))


def test_a_process_slowed_whole_by_a_burst_does_not_bar_a_figure_it_did_not_move() -> None:
    a, b = _replica("a", BURST), _replica("b", CALM)
    assert a.spread > FAR * CLASS  # its whole spread: what barred it before
    assert a.vouching_spread < FAR * CLASS  # the processes its figure rests on: 1.63 and 1.56
    assert barred([a, b], CLASS, {}) == {}
    settled = settle([a, b], wanted=2, class_spread=CLASS)
    assert settled.outcome == Outcome.REPLICATED, settled.reason
    assert settled.agreed == ("a", "b")


def test_a_figure_whose_own_processes_scatter_still_cannot_vouch() -> None:
    scattered = _replica("a", (1.0, 2.0, 3.0))  # any two of them 50 % or more apart
    settled = settle([scattered, _replica("b", (2.0, 2.01, 1.99))], wanted=2, class_spread=CLASS)
    assert "a: cannot vouch: its own spread" in settled.reason, settled.reason
    assert settled.outcome == Outcome.PENDING
    assert core_spread((1.0, 2.0)) == spread_of((1.0, 2.0))  # two processes: both are its figure's


def test_a_quiet_class_bars_no_replica_for_a_scatter_inside_the_board() -> None:
    quiet = pooled_spread([0.0004] * POOL_MIN, 3)  # processes that time alike to 0.04 %
    a, b = _replica("a", (10.05, 10.1, 10.16)), _replica("b", (10.0, 10.0, 10.01))
    assert a.vouching_spread > FAR * quiet  # what barred it before: 0.3 % against 0.09 %
    assert vouching_limit(quiet) == FAR * BOARD > a.vouching_spread
    assert vouching_limit(0.02) == FAR * 0.02  # a class of 1 % or more: its own spread, as before
    assert barred([a, b], quiet, {}) == {}
    settled = settle([a, b], wanted=2, class_spread=quiet)
    assert settled.outcome == Outcome.REPLICATED, settled.reason
    scattered = _replica("a", (5.0, 10.0, 15.0))  # its figure's own processes 42 % apart: barred
    assert "a: cannot vouch: its own spread" in settle([scattered, b], wanted=2, class_spread=quiet).reason


def test_a_liar_that_scatters_a_minority_of_its_processes_gains_nothing_over_an_even_lie() -> None:
    honest = _replica("b", CALM)
    for factor in (0.5, 0.7, 0.85):  # every claim the band refuses is refused alike
        even = _replica("liar", tuple(m * factor for m in CALM))
        scattered = _replica("liar", (CALM[0] * factor, CALM[1] * factor, CALM[2] * 3))
        said = [settle([r, honest], wanted=2, class_spread=CLASS) for r in (even, scattered)]
        assert said[0].outcome == said[1].outcome, (factor, said)
        assert said[0].figure_ms == said[1].figure_ms


def test_only_a_replica_whose_whole_spread_is_within_far_teaches_the_class_its_error() -> None:
    yaml = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{replicas: 2, same_host: allow}}
jobs: [{{compute_unit: CPU (ONNX), devices: all}}]
"""
    sched = Scheduler("c", parse_campaign(yaml), {"m": MODEL}, key=KEY)
    out = sched.handle(PeersDiscovered(peers=(peer("a"), peer("b"))), 0.0)
    said = {"12D3-a": _replica("a", BURST), "12D3-b": _replica("b", CALM)}
    settled: list[ReplicasSettled] = []
    for offer in [c for c in out if isinstance(c, SendOffer)]:
        sched.handle(OfferCommitted(offer.task_id, offer.peer_id, "L"), 1.0)
        r = said[offer.peer_id]
        result = ResultAccepted(
            offer.task_id, "L", offer.peer_id, r.median_ms, r.spread, r.fingerprint, r.core
        )
        settled += [c for c in sched.handle(result, 2.0) if isinstance(c, ReplicasSettled)]
    (group,) = settled
    assert group.outcome == "replicated", group
    assert group.errors == (process_error(said["12D3-b"].spread, 3),)  # the burst's process taught nothing
