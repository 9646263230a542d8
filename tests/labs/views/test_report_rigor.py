"""Issue 7 rigor: process medians and the stability flag under real background load; the stopping rule.

Real measurements (drivers.measure spawning real children on a small ONNX model), real busy-loop
processes for the background load.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import scheduler as sch
from drivers import measure
from drivers.files.models import write_convnet
from drivers.measuring.stats import ci_within, median_ci
from protocol import MAX_SAMPLES, ComputeUnit, TaskSpec

BUSY = "import sys\nprint('spinning', flush=True)\nwhile True:\n    pass\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_convnet(tmp_path_factory.mktemp("rigor") / "small.onnx", channels=8, blocks=2, size=32)


def _spec(**changes: object) -> TaskSpec:
    base: dict[str, object] = {
        "compute_unit": ComputeUnit.CPU_ONNX, "runs": 20, "warmups": 2, "load_runs": 1, "threads": 1,
        "processes": 2, "timeout_s": 120.0,
    }  # fmt: skip
    return TaskSpec.model_validate(base | changes)


@pytest.fixture
def busy_cores() -> Iterator[list[subprocess.Popen[str]]]:
    """One busy-loop process per core (2 here), each confirmed spinning before the test goes on."""
    procs = [
        subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "spinning"
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()


def test_a_run_under_background_load_is_flagged_unstable(tmp_path: Path, busy_cores: list[object]) -> None:
    # Background load is read from the kernel's 10 ms CPU ticks over the timed loop: give it ~0.2 s or more.
    model = write_convnet(tmp_path / "bigger.onnx", channels=16, blocks=3, size=64)
    m = measure(model, _spec(runs=200))
    assert len(m.process_medians_ms) == 2
    assert all(x > 0 for x in m.process_medians_ms)
    assert m.process_spread_pct >= 0
    assert m.conditions.background_cores > 0.2
    assert m.unstable
    assert any("background load" in r for r in m.unstable_reasons)


def test_an_unreachable_bound_stops_at_max_runs(model: Path) -> None:
    m = measure(model, _spec(runs=10, ci_target_pct=1e-9, max_runs=37))
    assert m.inference_ms.n == 2 * 37


def test_an_unreachable_bound_stops_at_max_duration(model: Path) -> None:
    most = MAX_SAMPLES // 2  # the largest cap two processes may ask for
    m = measure(model, _spec(runs=10, ci_target_pct=1e-9, max_runs=most, max_duration_s=0.3))
    assert 2 * 10 < m.inference_ms.n < 2 * most  # ran on past the minimum, then time stopped it


def test_a_loose_bound_is_met_at_the_minimum(model: Path) -> None:
    # 100%: the 95% interval of the median of 20 runs (its 6th to 15th values) within [0, 2 x median].
    m = measure(model, _spec(runs=20, ci_target_pct=100.0, max_runs=500))
    assert m.inference_ms.n == 2 * 20


# Ranks (0-based) of the 95% interval from scipy.stats.binom: the largest k with 2 P(X <= k-1) <= 0.05.
@pytest.mark.parametrize(("n", "low", "high"), [(6, 0, 5), (10, 1, 8), (20, 5, 14), (100, 39, 60)])
def test_median_ci_uses_the_binomial_order_statistics(n: int, low: int, high: int) -> None:
    assert median_ci([float(i) for i in range(n)]) == (low, high)


def test_median_ci_needs_six_samples_and_narrows_with_more() -> None:
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert not ci_within([1.0] * 5, 50.0)  # too few to know
    wide = median_ci([float(i) for i in range(40)])
    narrow = median_ci([float(i) / 100 for i in range(4000)])
    assert wide is not None
    assert narrow is not None
    assert (wide[1] - wide[0]) / 20 > (narrow[1] - narrow[0]) / 20
    assert ci_within([10.0 + (i % 3) * 0.01 for i in range(50)], 1.0)
    assert not ci_within([float(i) for i in range(1, 51)], 1.0)


def test_a_campaign_job_carries_the_stopping_rule() -> None:
    text = (
        "model: {path: m.onnx}\njobs:\n  - compute_unit: CPU (ONNX)\n    num_inference_runs: 20\n"
        "    ci_target_pct: 2\n    max_runs: 400\n    max_duration_s: 30\n"
    )
    spec = sch.parse_campaign(text).jobs[0].spec
    assert (spec.runs, spec.ci_target_pct, spec.max_runs, spec.max_duration_s) == (20, 2.0, 400, 30.0)
    with pytest.raises(sch.CampaignError, match="ci_target_pct"):
        sch.parse_campaign(text.replace("ci_target_pct: 2", "ci_target_pct: -1"))
