"""Every trio test body runs under a trio deadline (tests/conftest.py), which a marker can change."""

from __future__ import annotations

import pytest
import trio


async def test_a_trio_test_body_runs_under_the_default_deadline() -> None:
    deadline = trio.current_effective_deadline()
    assert trio.current_time() < deadline <= trio.current_time() + 240


@pytest.mark.trio_deadline(5)
async def test_the_marker_sets_a_test_body_deadline() -> None:
    assert trio.current_effective_deadline() <= trio.current_time() + 5
