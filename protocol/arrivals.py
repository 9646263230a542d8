"""The one seeded arrival generator of open-loop load: Poisson send times from a SplitMix64 stream.

Pure: the seed is an argument (drawn by the caller and kept with the run). The submitter deals a
fleet's schedule from it (`scheduler.state.fleet.deal`) and a lone worker's open loop plans its own sends
with it (`drivers.endpoint.sender`), so the same seed and rate give the same send times everywhere.
"""

from __future__ import annotations

import math
from typing import Final

from protocol.fleet import MAX_DEALT
from protocol.generation import MAX_RECORDS

_MASK: Final = (1 << 64) - 1


class SplitMix64:
    """A seeded stream of 64-bit outputs and uniform floats in [0, 1): SplitMix64 (Steele, Lea,
    Flood 2014), the project's one seeded generator (arrivals here, datasets' prompts in
    `scheduler.language.dataset`): the same seed gives the same draws on every platform."""

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next64(self) -> int:
        """The next 64-bit output."""
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def next_float(self) -> float:
        """The next uniform float in [0, 1), from the top 53 bits of the next output."""
        return (self.next64() >> 11) / float(1 << 53)


def arrivals(rate: float, duration_s: float, seed: int, limit: int = MAX_DEALT) -> tuple[float, ...]:
    """Poisson arrival times (seconds after the start) at `rate` per second, within `duration_s`.

    The first request goes at 0; gaps are exponential, -ln(1 - u) / rate. At most `limit` arrivals.
    """
    rng, t, times = SplitMix64(seed), 0.0, list[float]()
    while t < duration_s and len(times) < limit:
        times.append(t)
        t += -math.log1p(-rng.next_float()) / rate
    return tuple(times)


def open_loop(rate: float, seed: int, duration_s: float | None, prompts: int, most: int) -> tuple[float, ...]:
    """A lone worker's open-loop sends: Poisson at `rate` over `duration_s`, or one for each of its
    `prompts` when the run has no duration; at most `most` and `MAX_RECORDS` (a result's records).

    The worker sends these (`drivers.endpoint.sender.open_at`); the submitter, which drew the seed, checks the
    records against them (`scheduler.verification.sendcheck`).
    """
    count = min(most, MAX_RECORDS) if duration_s else min(most, prompts)
    return arrivals(rate, duration_s or math.inf, seed, count)


__all__ = ["SplitMix64", "arrivals", "open_loop"]
