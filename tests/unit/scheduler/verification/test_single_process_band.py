"""Issue 50, scope 5: a band no replica's process count can widen.

One process has no scatter of process medians (its spread is 0), so before this issue a class measured
only with `processes: 1` never added to its pool and kept the prior's band for good: 46.3 %, in which a
0.72x liar beside one honest peer was `replicated 2/2`. Now a single-process replica adds its distance
from the others of its agreeing group (`agreement.pair_error`, what the submitter measured across
peers, never a worker's own word), the pool's median learns the class's real error, and the same liar
is refused once it has; `plan` says the band a fresh class is judged with (`judged_band`).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
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
from scheduler.state import PeerView
from scheduler.state.settling import pool_key
from scheduler.verification import (
    POOL_KEEP,
    Replica,
    judged_band,
    pair_error,
    pool_error,
    pooled_spread,
    settle,
)
from scheduler.verification.agreement import POOL_MIN, PRIOR, agree

YAML = f"""\
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
processes: 1
verify: {{replicas: 2}}
jobs: [{{compute_unit: CPU (ONNX), devices: any}}]
"""
MODELS = {"m": MODEL, MODEL.name: MODEL}
LIAR = 0.72


def pair(
    figures: dict[str, float], errors: dict[str, tuple[float, ...]] | None = None
) -> tuple[Scheduler, list[object]]:
    """A quorum of two single-process replicas on two networks, each peer delivering its figure (a
    third replica finds no peer: a disagreement ends the group), and every command it gave."""
    peers: list[PeerView] = [
        dataclasses.replace(peer(name), host=f"10.0.{i}.1") for i, name in enumerate(("a", "b"))
    ]
    sched = Scheduler("c1", parse_campaign(YAML), MODELS, key=KEY)
    sched.know_records({}, errors)
    out = sched.handle(PeersDiscovered(peers=tuple(peers)), 0.0)
    log: list[object] = []
    now = 1.0
    while offers := [c for c in out if isinstance(c, SendOffer)]:
        out = []
        for o in offers:
            out += sched.handle(OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            accepted = ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, figures[o.peer_id], 0.0, "x")
            out += sched.handle(accepted, now)
        log += out
        now += 1
    return sched, log


def test_a_fresh_single_process_class_is_judged_with_the_priors_wide_band_and_plan_can_say_so() -> None:
    band, learnt = judged_band((), 1)
    assert learnt == 0
    assert round(band, 3) == 0.463  # the prior at one process: a 0.72x claim (38.9 % off) agrees
    assert agree(Replica("liar", LIAR * 10, 0.0), Replica("honest", 10, 0.0), pooled_spread((), 1))
    assert judged_band((), 3)[0] < 0.28  # three processes: 27 %, and the liar does not agree
    assert not agree(Replica("liar", LIAR * 10, 0.0), Replica("honest", 10, 0.0), pooled_spread((), 3))


def test_single_process_groups_add_their_distance_to_the_pool_where_spread_added_nothing() -> None:
    _, log = pair({"12D3-a": 10.0, "12D3-b": 10.3})
    (group,) = [c for c in log if isinstance(c, ReplicasSettled)]
    assert group.outcome == "replicated"
    assert len(group.errors) == 2
    assert group.errors == pytest.approx((pair_error(10.0, [10.3]),) * 2)
    assert group.errors[0] > 0
    assert pool_error(group.errors * POOL_MIN) < PRIOR  # what the class learns: 3 % apart, not 9.3 %


def test_once_the_class_has_learnt_its_error_a_072x_liar_beside_one_honest_peer_is_refused() -> None:
    """Thirty honest single-process pairs of a quiet class (process medians 2.4 % apart by noise, and
    1 % between boards) fill the pool; the band drops from 46 % to about 12 %, honest pairs still
    agree, and a liar reporting 0.72x beside one honest peer is not `replicated` any more."""
    rng = random.Random(50)
    errors: list[float] = []
    for _ in range(30):
        a, b = (10 * rng.gauss(1, 0.024) * rng.gauss(1, 0.01) for _ in range(2))
        errors += [pair_error(a, [b]), pair_error(b, [a])]
    pool = tuple(errors[-POOL_KEEP:])
    band, learnt = judged_band(pool, 1)
    assert learnt == 60
    assert band < 0.2
    spread = pooled_spread(pool, 1)
    honest = [Replica(f"h{i}", 10 * rng.gauss(1, 0.024), 0.0) for i in range(2)]
    assert settle(honest, 2, spread, {}).outcome.value == "replicated"
    liar = Replica("liar", LIAR * honest[0].median_ms, 0.0)
    assert not agree(liar, honest[0], spread)

    first, _ = pair({"12D3-a": 10.0, "12D3-b": LIAR * 10.0})  # a fresh class: the prior's band
    assert {t.verified for t in first.tasks()} == {"replicated 2/2"}
    taught = next(iter({pool_key(t) for t in first.tasks()}))
    learnt_run, _ = pair({"12D3-a": 10.0, "12D3-b": LIAR * 10.0}, {taught: pool})
    assert not any(t.verified.startswith("replicated") for t in learnt_run.tasks())
