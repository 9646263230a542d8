"""The token clock: a transformers streamer that timestamps every generated token on a monotonic clock.

Imported only by `drivers.runtimes.llm`, inside the driver, once transformers is known to be installed.
"""

from __future__ import annotations

import time
from typing import Any

from transformers.generation.streamers import BaseStreamer


class TokenClock(BaseStreamer):  # type: ignore[misc]
    """Records `time.perf_counter_ns()` at each token `generate` hands over.

    `generate` first puts the prompt, then each new token (one per step for a batch of one); the
    prompt is skipped. A put carrying several tokens is timed once per token at the same instant.

    Attributes:
        start_ns: the clock when the request was sent (set by the caller).
        token_ns: one reading per output token, in order.
    """

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.token_ns: list[int] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        """Time the tokens just generated (the first call carries the prompt and is skipped)."""
        now = time.perf_counter_ns()
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.token_ns.extend([now] * int(value.numel()))

    def end(self) -> None:
        """Generation finished; nothing to flush."""
