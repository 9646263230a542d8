"""A bug inside nested nurseries: the command says its cause first, in one line, then the traceback
(which ends with the cause, where a log cut short or a terminal's scrollback loses it)."""

from __future__ import annotations

import pytest
import trio

from node.cli.options import run


async def _crashes_in_a_nursery_in_a_nursery() -> None:
    async def sleeps() -> None:
        await trio.sleep_forever()

    async def breaks() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("the reason")

    async with trio.open_nursery() as outer:
        outer.start_soon(sleeps)
        async with trio.open_nursery() as inner:
            inner.start_soon(sleeps)
            inner.start_soon(breaks)


def test_a_bug_in_nested_nurseries_is_named_in_one_line_before_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(BaseExceptionGroup):
        run(_crashes_in_a_nursery_in_a_nursery)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("internal error (a bug): ValueError: the reason (test_internal_error.py:")
    assert line.endswith("; the traceback follows")
