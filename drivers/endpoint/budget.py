"""The memory one endpoint run's requests may keep at once, across every request in flight.

A request keeps, between two reads of its body, the line in progress, the event's data lines, its
answer and reasoning text, and one time per delta. Each request holds a `Hold` on the run's
`Budget` and sets it to what it keeps after every read; the run's totals are the sum over every
request in flight, so a server cannot multiply one request's cap by the number of requests (1,024
endless streams of an open loop). A hold that would take the run past either limit is refused with
a reason, and the request ends there as `response_too_large`. Bytes bound the kept text; pieces
(strings and times, each a Python object of 30 to 60 bytes whatever it holds) bound a stream of many
tiny deltas, which would cost far more memory than its bytes say. The text the ended requests keep
in their records, and their token times, are held to `MAX_RUN_TEXT` and `MAX_RUN_TIMES` across the
run (`Budget.ended`).
"""

from __future__ import annotations

from typing import Final, final

from protocol import RequestRecord

MAX_RUN_BYTES: Final = 64 << 20
"""Bytes kept by one run's requests in flight, together (text, lines in progress, data lines)."""
MAX_RUN_PIECES: Final = 1 << 20
"""Pieces kept by one run's requests in flight, together (data lines, text parts, delta times)."""
MAX_RUN_TIMES: Final = 8 << 20
"""Token times the run's ended requests keep, together (about 270 MB as Python floats at most): past
it, a request ends `response_too_large` and keeps none (5,000 honest answers of 1,600 tokens fit)."""
MAX_RUN_TEXT: Final = 32 << 20
"""Characters of answer and reasoning text the run's ended requests keep, together: past it, a record
keeps its times and counts but not its text (`text_dropped`, as a result trimmed to fit an envelope),
so 5,000 answers of 200,000 characters each cannot hold a gigabyte."""


@final
class Budget:
    """One run's limits and what its requests in flight keep now (one trio loop owns it: no lock)."""

    def __init__(
        self,
        max_bytes: int = MAX_RUN_BYTES,
        max_pieces: int = MAX_RUN_PIECES,
        max_text: int = MAX_RUN_TEXT,
        max_times: int = MAX_RUN_TIMES,
    ) -> None:
        self.max_bytes, self.max_pieces, self.max_text, self.max_times = (
            max_bytes,
            max_pieces,
            max_text,
            max_times,
        )
        self.times = 0  # token times the ended requests keep
        self.bytes = 0
        self.pieces = 0
        self.refused = 0  # holds refused over the run
        self.text = 0  # characters of text the ended requests keep

    def ended(self, record: RequestRecord, reasoning: str, server: str) -> tuple[RequestRecord, str]:
        """What an ended request's record (and reasoning text) may keep within the run's budgets for
        ended requests: its token times (else it ends `response_too_large`, naming `server`, with
        none), then its text (else it keeps none, `text_dropped`)."""
        times = len(record.token_times_ms)
        if self.times + times > self.max_times:
            detail = f"server {server}: the run's ended requests would keep {self.times + times} token times,"
            detail += f" past its budget of {self.max_times}"
            cut = record.with_(error="response_too_large", error_detail=detail, token_times_ms=(), chunks=0)
            return cut.with_(
                ttft_ms=None, ttfo_ms=None, output_text="", text_dropped=bool(record.output_text)
            ), ""
        self.times += times
        chars = len(record.output_text) + len(reasoning)
        if self.text + chars > self.max_text:
            return record.with_(output_text="", text_dropped=True), ""
        self.text += chars
        return record, reasoning

    def hold(self) -> Hold:
        """A new request's hold, keeping nothing yet."""
        return Hold(self)


@final
class Hold:
    """What one request keeps, counted in its run's `Budget` until `release`."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self.bytes = 0
        self.pieces = 0

    def keep(self, nbytes: int, pieces: int) -> str | None:
        """Set what this request keeps now; the reason when the run would pass a limit (None: kept).

        A refused hold keeps its earlier counts: the caller ends the request and releases it.
        """
        budget = self._budget
        total_bytes = budget.bytes - self.bytes + nbytes
        total_pieces = budget.pieces - self.pieces + pieces
        if total_bytes > budget.max_bytes or total_pieces > budget.max_pieces:
            budget.refused += 1
            return (
                f"the run's requests in flight would keep {total_bytes} bytes in {total_pieces} pieces,"
                f" past its budget of {budget.max_bytes} bytes and {budget.max_pieces} pieces"
                f" (this response: {nbytes} bytes, {pieces} pieces)"
            )
        budget.bytes, budget.pieces = total_bytes, total_pieces
        self.bytes, self.pieces = nbytes, pieces
        return None

    def release(self) -> None:
        """The request ended: what it kept is its record's now, no longer the run's in flight."""
        self._budget.bytes -= self.bytes
        self._budget.pieces -= self.pieces
        self.bytes = self.pieces = 0


__all__ = ["MAX_RUN_BYTES", "MAX_RUN_PIECES", "MAX_RUN_TEXT", "MAX_RUN_TIMES", "Budget", "Hold"]
