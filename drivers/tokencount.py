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

import multiprocessing
import resource
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Final

import trio

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
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=main, args=(sender, pin, texts), name="sark-tokens", daemon=True)
    process.start()
    sender.close()
    try:
        with trio.move_on_after(COUNT_TIMEOUT_S):
            await trio.lowlevel.wait_readable(receiver.fileno())
            try:
                kind, value = receiver.recv()
            except EOFError:
                return None, f"the counting child exited with code {process.exitcode}"
            return (value, "") if kind == "counts" else (None, str(value))
        return None, f"counting timed out after {COUNT_TIMEOUT_S:g} s"
    finally:
        if process.is_alive():
            process.kill()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(process.join)
        receiver.close()


def main(conn: Connection, pin: TokenizerPin, texts: list[str]) -> None:
    """Entry point of the child: inflate and parse the tokenizer, count every text; never raises."""
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        cap = size + MEMORY_MB * (1 << 20)
        if hard == resource.RLIM_INFINITY or cap < hard:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError):
        pass  # no /proc (macOS): the deadline still bounds the child
    try:
        from protocol.tokenizer import Pinned, unpack

        vocabulary = Pinned(unpack(pin), pin.name)
        conn.send(("counts", [len(vocabulary.encode(text)) if text else 0 for text in texts]))
    except Exception as exc:  # the child's boundary: the parent gets the reason, never a traceback
        conn.send(("failed", f"{pin.name}: {type(exc).__name__}: {str(exc)[:200]}"))
    finally:
        conn.close()


__all__ = ["counted"]
