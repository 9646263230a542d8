"""The calibration's CPU figure is taken on every BLAS thread and on one, and is the faster of the two,
as the CPU challenge's kernel times its chain (`drivers.measuring.challengechild`): beside other work,
OpenBLAS on every thread crawled (1.0 GFLOPS against 92 on one, 2 cores at load 8), so a worker that
joined on a busy machine advertised about 1 % of its device. The mechanism is pinned with the timer
replaced (no timing is asserted); the method is in the cache key, so an older figure is taken again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

from drivers.measuring import calibrate


def test_the_cpu_figure_is_the_faster_of_every_thread_and_one(monkeypatch: pytest.MonkeyPatch) -> None:
    held: list[int | None] = []
    now: list[int | None] = [None]

    def limit() -> Callable[[int | None], AbstractContextManager[object]]:
        @contextmanager
        def at(threads: int | None) -> Iterator[object]:
            held.append(threads)
            now[0] = threads
            yield None
            now[0] = None

        return at

    seconds = {None: 0.1, 1: 0.002}  # every thread crawling beside other work, one thread not

    def best(kernel: object, _: float) -> float:
        return seconds[now[0]]

    monkeypatch.setattr(calibrate, "blas_limit", limit)
    monkeypatch.setattr(calibrate, "_best", best)
    figure = calibrate.cpu_gflops(n=100)
    assert held == [None, 1]
    assert figure == pytest.approx(2.0 * 100**3 / 0.002 / 1e9)
    seconds.update({None: 0.001, 1: 0.002})  # a quiet machine: every thread wins
    assert calibrate.cpu_gflops(n=100) == pytest.approx(2.0 * 100**3 / 0.001 / 1e9)


def test_the_method_is_in_the_cache_key() -> None:
    versions = {"numpy": "2", "onnxruntime": "1"}
    key = calibrate.calibration_key("f" * 64, versions)
    assert key == calibrate.calibration_key("f" * 64, versions)
    old = __import__("hashlib").sha256("|".join(["f" * 64, "2", "1"]).encode()).hexdigest()[:16]
    assert key != old  # a figure cached by the method before is taken again
