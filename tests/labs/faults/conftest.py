"""Fixtures of the fault suite: the namespace lab with a fourth host, the process lab, the fault injector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.faults import Faults
from kit.fleet import FaultNet
from kit.netns import running
from kit.procs import Lab


@pytest.fixture
def fnet() -> Iterator[FaultNet]:
    """h1, h2, h4 on a bridge and h3 behind NAT, always torn down; skipped where namespaces are refused."""
    yield from running(FaultNet())


@pytest.fixture
def plab(tmp_path: Path) -> Iterator[Lab]:
    """Processes of the test; killed at teardown (after the faults are undone)."""
    lab = Lab(tmp_path, record_ttl=30.0)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture
def faults(fnet: FaultNet, plab: Lab) -> Iterator[Faults]:
    """The fault injector; undoes every fault (continue, thaw, heal) before the processes are killed."""
    with Faults(fnet) as injector:
        yield injector
