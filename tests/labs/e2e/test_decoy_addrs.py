"""Issue 30: an advert's addresses are not dialled as given.

A real `join`, patched in memory (tests/kit/decoy.py), signs an advert listing the addresses of other
services (real loopback listeners that count the connections they accept) before its own, publishes
it and is killed: its advert and provider records stay on the gate for their lifetime, and every
submitter that looks at the swarm dials the advert's addresses to confirm it. `submit`, as README
writes it, then runs a campaign on the swarm (an honest worker takes it):

- an advert with more than `MAX_ADVERT_ADDRS` addresses (200) is invalid at the edge: the gate does
  not keep it, and no decoy is connected to (every one of them was, over and over, for as long as
  the advert lived);
- an advert within the bound (15 decoys, then the worker's own address): a dial tries at most
  `MAX_DIRECT` addresses of the peer, the one the DHT's provider record gives first, so at most
  `MAX_DIRECT - 1` decoys ever see a connection (all 15 did).
"""

from __future__ import annotations

import selectors
import socket
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, submitter_id, write_campaign
from kit.procs import SARK

from node.p2p.dial import MAX_DIRECT
from protocol import MAX_ADVERT_ADDRS

DECOY = Path(__file__).resolve().parents[2] / "kit" / "decoy.py"


class Decoys:
    """Loopback listeners that accept and close every connection, counting them per listener."""

    def __init__(self, count: int) -> None:
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            s.setblocking(False)
            self.sockets.append(s)
        self.addrs = [f"/ip4/127.0.0.1/tcp/{s.getsockname()[1]}" for s in self.sockets]
        self.accepted: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as sel:
            for addr, s in zip(self.addrs, self.sockets, strict=True):
                sel.register(s, selectors.EVENT_READ, addr)
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.1):
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    conn.close()
                    self.accepted[key.data] += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in self.sockets:
            s.close()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[CampaignLab]:
    lab = CampaignLab(tmp_path, record_ttl=60.0)
    try:
        yield lab
    finally:
        lab.close()


def _submit_beside_a_dead_liar(lab: CampaignLab, decoys: Decoys, tmp_path: Path) -> None:
    """A gate, an honest worker, a decoy worker killed once its advert is out; then `submit`, which
    runs the campaign on the honest worker (exit 0)."""
    gate = lab.gate().ready["addrs"][0]
    me = submitter_id(tmp_path / "me")
    lab.real_worker("honest", [gate], me)
    listed = tmp_path / "decoys.txt"
    listed.write_text("\n".join(decoys.addrs))
    liar = lab.real_worker("liar", [gate], me, program=[sys.executable, str(DECOY), str(listed)])
    lab.kill(liar)  # its records stay on the gate: a submitter dials what its advert lists
    campaign = write_campaign(tmp_path / "c.yaml", {
        "model": {"path": MODEL.name}, "jobs": [{"compute_unit": "CPU (ONNX)", "num_inference_runs": 20}],
    })  # fmt: skip
    out = tmp_path / "out"
    argv = [
        *SARK,
        "submit",
        str(campaign),
        "--gate",
        gate,
        "--data-dir",
        str(tmp_path / "me"),
        "--out",
        str(out),
    ]
    done = zygote.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr


def test_an_advert_with_too_many_addresses_is_invalid_and_none_is_dialled(
    lab: CampaignLab, tmp_path: Path
) -> None:
    decoys = Decoys(200)
    try:
        _submit_beside_a_dead_liar(lab, decoys, tmp_path)
    finally:
        decoys.close()
    assert len(decoys.addrs) > MAX_ADVERT_ADDRS
    assert sum(decoys.accepted.values()) == 0


def test_a_submitter_dials_a_few_addresses_of_a_peer_the_seen_one_first(
    lab: CampaignLab, tmp_path: Path
) -> None:
    decoys = Decoys(MAX_ADVERT_ADDRS - 1)  # and the worker's own address: within the bound
    try:
        _submit_beside_a_dead_liar(lab, decoys, tmp_path)
    finally:
        decoys.close()
    print(
        f"\n{sum(decoys.accepted.values())} connections to {len(decoys.accepted)} of {len(decoys.addrs)} "
        f"decoys (at most {MAX_DIRECT} addresses a dial)"
    )
    assert len(decoys.accepted) <= MAX_DIRECT - 1  # the provider record's address took the first slot
