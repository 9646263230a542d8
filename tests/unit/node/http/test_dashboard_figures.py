"""The dashboard's figures carry the inference sample's count and the decimals its spread supports, by
the rule report.html, Markdown and the terminal round with (`scheduler.results.decimals_for`): the
dashboard's cell "12.49 · p90 13.1 · … · n 300" reads as report.html's matrix does (issue 49, scope 5).
"""

from __future__ import annotations

from kit.golden_campaigns import _tensor_measurement  # type: ignore[import-not-found, unused-ignore]

from node.http.shapes import dashboard_figures
from protocol import ComputeUnit, Stats
from scheduler.results import decimals_for


def _stats(n: int, stddev: float) -> Stats:
    tail = {"p90": 13.1, "p95": 13.5, "p99": 14.4, "min": 11.0, "max": 15.0}
    return Stats(n=n, mean=12.5, median=12.4912, stddev=stddev, cv=0.01, **tail)


def test_the_count_and_decimals_are_the_other_views_own() -> None:
    base = _tensor_measurement(ComputeUnit.CPU_ONNX)
    for n, stddev in ((300, 0.5), (10, 2.0), (2_000, 0.001), (1, 0.0)):
        measurement = base.model_copy(update={"inference_ms": _stats(n, stddev)})
        figures = dashboard_figures(measurement)
        assert figures["InferenceN"] == n
        assert figures["InferenceDecimals"] == decimals_for(measurement.inference_ms)
        assert figures["InferenceMsMedian"] == 12.4912  # the figure itself is never rounded: the page rounds
    spreads = {
        dashboard_figures(base.model_copy(update={"inference_ms": _stats(n, s)}))["InferenceDecimals"]
        for n, s in ((10, 20.0), (10, 2.0), (2_000, 0.001))
    }
    assert spreads == {1, 2, 3}  # a wide spread, a narrow one, a very narrow one: three roundings


def test_a_measurement_without_a_sample_has_three_decimals_and_n_0() -> None:
    measurement = _tensor_measurement(ComputeUnit.CPU_ONNX)
    empty = measurement.model_copy(update={"inference_ms": _stats(0, 0.0)})
    figures = dashboard_figures(empty)
    assert figures["InferenceN"] == 0
    assert figures["InferenceDecimals"] == 3
