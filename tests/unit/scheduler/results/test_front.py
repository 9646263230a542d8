"""The throughput-latency front (`scheduler.results.front`): a point is on it when no other point of
its group has at least its throughput at no more latency; groups of one draw none."""

from __future__ import annotations

from scheduler.results.front import FrontPoint, _marked


def _p(load: str, throughput: float, latency: float) -> FrontPoint:
    return FrontPoint(job_id=load, load=load, throughput=throughput, latency_ms=latency)


def test_the_front_keeps_the_points_no_other_beats_on_both() -> None:
    points = [
        _p("c4", 300, 100),
        _p("c1", 140, 60),
        _p("c2", 210, 75),
        _p("slow", 200, 90),
        _p("tie", 300, 100),
    ]
    marked = {p.load: p.on_front for p in _marked(points)}
    assert marked == {"c1": True, "c2": True, "c4": True, "slow": False, "tie": True}  # equal: neither beats
    assert [p.load for p in _marked(points)][:2] == ["c1", "c2"]  # by latency
