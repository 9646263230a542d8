"""Marks on the timed phase's time axis, and the timed loop of a sustained run.

A mark is (the index of the next timed run, the time in ms since the telemetry sampler's origin):
the child marks each progress chunk of an ordinary run and each window edge of a sustained one, so
`protocol.windows` can cut the samples into stretches of time on both sides of the wire.

A sustained run times runs until `duration_s` has passed, marking every `window_s`. Its samples are
bounded: past `MAX_SAMPLES` kept runs it keeps 1 run in 2 (then 1 in 4, ...), the marks renumbered,
so a fast model on a long run keeps an even sample of its runs in every window.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Final

from protocol import MAX_SAMPLES, Phase
from protocol.telemetry import SustainSpec

NS_PER_MS: Final = 1e6
NS_PER_S: Final = 1e9


class Marks:
    """The marks one child sets, against `origin_ns` (a `time.perf_counter_ns` value)."""

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns
        self.runs: list[int] = []
        self.ms: list[float] = []

    def add(self, index: int, now_ns: int | None = None) -> None:
        """Mark that run `index` is the first one timed after now (or after `now_ns`)."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        self.runs.append(index)
        self.ms.append((now - self.origin_ns) / NS_PER_MS)

    def thinned(self) -> None:
        """Renumber the marks after the samples were thinned to every other one (indexes 0, 2, 4...)."""
        self.runs = [(r + 1) // 2 for r in self.runs]


def sustained_runs(
    conn: Connection,
    run: Callable[[], object],
    sustain: SustainSpec,
    marks: Marks,
    cap: int = MAX_SAMPLES,
) -> list[float]:
    """Timed runs for `sustain.duration_s`, one mark at the start and at each window's edge (the
    last edge is the end); returns the kept samples in ms (every one, or 1 in 2**k past `cap`)."""
    edges = _edges(sustain)
    conn.send(("phase", Phase.MEASURING, 0, len(edges)))
    start = time.perf_counter_ns()
    marks.add(0, start)
    kept: list[int] = []
    stride, count, edge = 1, 0, 0
    pc = time.perf_counter_ns
    gc.disable()
    try:
        while edge < len(edges):
            t0 = pc()
            run()
            t1 = pc()
            if count % stride == 0:
                kept.append(t1 - t0)
            count += 1
            while edge < len(edges) and t1 - start >= edges[edge]:
                marks.add(len(kept), t1)
                edge += 1
                conn.send(("phase", Phase.MEASURING, edge, len(edges)))
            if len(kept) >= cap:
                kept, stride = kept[::2], stride * 2
                marks.thinned()
    finally:
        gc.enable()
    return [t / NS_PER_MS for t in kept]


def _edges(sustain: SustainSpec) -> list[int]:
    """Each window's end in ns after the start; the last one is the duration."""
    duration = int(sustain.duration_s * NS_PER_S)
    window = int(sustain.window_s * NS_PER_S)
    edges = list(range(window, duration, window))
    return [*edges, duration]
