"""Fixtures of the swarm tests: a device profile, hosts on loopback, the process lab."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kit.data import make_profile
from kit.netns import NetLab, running
from kit.procs import Lab
from node.p2p.host import Host, HostConfig, open_host

LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(make_profile().model_dump_json())
    return path


@pytest.fixture
async def host_pair(tmp_path: Path) -> AsyncIterator[tuple[Host, Host]]:
    async with (
        open_host(HostConfig(key_file=tmp_path / "a.key", listen=LOOPBACK)) as a,
        open_host(HostConfig(key_file=tmp_path / "b.key", listen=LOOPBACK)) as b,
    ):
        yield a, b


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """A process lab whose gates and workers keep records for 300 s: no listing races a republish."""
    lab = Lab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture
def net() -> Iterator[NetLab]:
    """The namespace lab (h1, h2 on a bridge, h3 behind NAT), always torn down; skipped where refused."""
    yield from running(NetLab())
