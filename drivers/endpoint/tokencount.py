"""Count a server's output with the campaign's pinned tokenizer, in a spawned child.

A stream without a usage chunk says nothing of how many tokens it carried (a chunk may hold several);
when the campaign pinned a tokenizer (`generate: {tokenizer: PATH}`), the worker counts each
request's answer and reasoning text with it, and the record says so (`token_source`
`tokenizer:<name>@<revision>`). Where the server did send usage, the count is kept beside it
(`counted_tokens`) and the row shows the discrepancy (`UsageVsCountedTokens`). The tokenizer's bytes
came from the campaign, so they are inflated and parsed in a fresh `spawn` child under a memory cap
and a deadline, never in the daemon (which also never maps the `tokenizers` library). A child that
fails leaves the records as they were: counted per chunk, and declared so.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Final

import trio

from drivers.measuring.childio import next_message, stopped
from drivers.measuring.spawning import STARTED, Entry, Limits, NotStarted, start_child
from protocol import RequestRecord, TokenizerPin

COUNT_TIMEOUT_S: Final = 60.0
MEMORY_MB: Final = 1024  # address space the child may add to its own at start


async def counted(
    records: Sequence[RequestRecord], reasoning: Sequence[str], pin: TokenizerPin
) -> tuple[tuple[RequestRecord, ...], str]:
    """The records with their output counted by `pin` (see the module docstring), and "" or why not.

    Args:
        records: the run's records, in order.
        reasoning: each record's reasoning text (the record keeps only the answer).
        pin: the campaign's tokenizer.
    """
    texts = [text for r, thought in zip(records, reasoning, strict=True) for text in (r.output_text, thought)]
    counts, problem = await _count_apart(pin, texts)
    if counts is None:
        return tuple(records), problem
    out = []
    for i, record in enumerate(records):
        answer, thought = counts[2 * i], counts[2 * i + 1]
        out.append(_with_count(record, answer + thought, thought, pin))
    return tuple(out), ""


def _with_count(record: RequestRecord, total: int, thought: int, pin: TokenizerPin) -> RequestRecord:
    if record.error is not None or record.text_dropped:
        return record
    if record.usage_tokens is not None:  # the server's count stands; ours is kept beside it
        return record.with_(counted_tokens=total)
    return record.with_(
        output_tokens=total,
        counted_tokens=total,
        reasoning_tokens=thought,
        token_source=pin.source(),
        tokens_counted=True,
    )


async def _count_apart(pin: TokenizerPin, texts: list[str]) -> tuple[list[int] | None, str]:
    limits = Limits(address_space_mb=MEMORY_MB)
    try:
        child = start_child(Entry(__name__, "main"), (pin, texts), name="sark-tokens", limits=limits)
    except NotStarted as exc:
        return None, f"counting failed: {exc.detail}"
    try:
        with trio.move_on_after(COUNT_TIMEOUT_S):
            while True:
                message = await next_message(child)
                if message is None:
                    await stopped(child)
                    return None, f"counting failed: {child.ended()}"
                if message[0] != STARTED:
                    return (message[1], "") if message[0] == "counts" else (None, str(message[1]))
        return None, f"counting timed out after {COUNT_TIMEOUT_S:g} s"
    except NotStarted as exc:
        return None, f"counting failed: {exc.detail}"
    finally:
        await stopped(child)


def main(conn: Connection, pin: TokenizerPin, texts: list[str]) -> None:
    """Entry point of the child (capped at `MEMORY_MB` above its size by `drivers.measuring.spawning`):
    inflate and parse the tokenizer, count every text; never raises."""
    try:
        from protocol.tokenizer import Pinned, unpack

        vocabulary = Pinned(unpack(pin), pin.name)
        conn.send(("counts", [len(vocabulary.encode(text)) if text else 0 for text in texts]))
    except Exception as exc:  # the child's boundary: the parent gets the reason, never a traceback
        conn.send(("failed", f"{pin.name}: {type(exc).__name__}: {str(exc)[:200]}"))
    finally:
        conn.close()


__all__ = ["counted"]
