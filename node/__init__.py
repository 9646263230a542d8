"""The libp2p edge and composition root: host, DHT, streams, worker and scheduler runtimes, CLI."""

from __future__ import annotations

__all__: list[str] = []
