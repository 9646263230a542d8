"""Issue 49: an embedded worker's lease does not lapse for its own submitter's starvation.

Its heartbeats come from the submitter's own process: at load 20 on 2 cores README's recipe lost both
leases, "no heartbeat for 10 s", while its workers measured. Its silence is given
`EMBEDDED_LEASE_TTL_S` (a join worker's stays the configured one); the lease's end still bounds it.
"""

from __future__ import annotations

from pathlib import Path

from node.cli.embedded import EMBEDDED_LEASE_TTL_S, embedded_worker
from node.config import NodeConfig


def test_an_embedded_worker_takes_offers_from_its_submitter_only_with_a_long_lease_silence(
    tmp_path: Path,
) -> None:
    config = NodeConfig(data_dir=tmp_path / "me")
    worker = embedded_worker(config, 1, ("/ip4/127.0.0.1/tcp/4001",), "me", "vm-1")
    assert worker.lease_ttl_s == EMBEDDED_LEASE_TTL_S > config.lease_ttl_s == 10.0
    assert (worker.allow, worker.open_mode, worker.device_name) == (("me",), False, "vm-1")
    assert worker.data_dir == config.data.embedded("worker-1")
    longer = embedded_worker(config.with_(lease_ttl_s=600.0), 0, (), "me", "vm-0")
    assert longer.lease_ttl_s == 600.0  # a longer one the user configured is kept
