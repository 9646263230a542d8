"""Issue 50, scope 2, in the submitter's discovery: hostile DHT servers near the root key on more
networks than its honest holders end the quick walk with their 20 Sybils alone; the discovery's probes
name those that did not answer, and the round's next look reads the key again by a walk that waits for
every one of its k closest (`Hints.unanswered`), where the honest holders list the two
honest workers.

The node written here runs the real `Dht.lookup` over a Kad of that one key (`test_reread.py`'s: a
walk of 0.2 s on trio's virtual clock, 0.4 s for one that waits for every holder) and probes as the
real one does: a Sybil stalls (a stream that opens and says nothing) or refuses at once (gone); an
honest worker answers in 50 ms.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio
import trio.testing
from kit.providers import advertised

from node.errors import NodeError
from node.p2p.dht import Dht
from node.p2p.kad import Kad
from node.p2p.lookup import Hints
from node.p2p.node import Node
from node.submitter.discovery import LOOKUP_SLACK, Discovery, DiscoveryConfig
from protocol import AdvertBody, Load
from unit.node.p2p.test_reread import HONEST, ROOT, SYBILS, _everys, _Kad


class _Node:
    def __init__(self, gone: bool, local: bool) -> None:
        self.kad = _Kad(SYBILS, SYBILS + HONEST, walk_s=0.2, local=local)
        self.dht = Dht(cast(Kad, self.kad))
        self.gone = gone

    async def find_providers(
        self, *, skip: frozenset[str], known: frozenset[str] = frozenset(), count: int | None, **kw: Any
    ) -> dict[str, tuple[str, ...]]:
        hints = Hints(known | skip, kw["discount"], kw["unanswered"], kw["dig"], kw["past_gaps"])  # `Node`'s
        found = await self.dht.lookup(None, count, hints, run_delay=kw["run_delay"])
        return {p: tuple(addrs) for p, addrs in found.providers.items() if p not in skip}

    async def profile_and_host_at(
        self, peer_id: str, addrs: tuple[str, ...], timeout: float = 5.0
    ) -> tuple[AdvertBody, Load, str]:
        if peer_id not in HONEST:
            if self.gone:
                raise NodeError(f"{peer_id}: connection refused")
            await trio.sleep_forever()  # stalls: the probe's deadline ends it
        await trio.sleep(0.05)
        return advertised(peer_id).advert, Load(), "20.0.0.1"


@pytest.mark.parametrize("local", [False, True], ids=["public", "local"])
@pytest.mark.parametrize("gone", [False, True], ids=["stalling", "gone"])
async def test_a_round_reads_a_key_again_past_its_hostile_holders_when_its_providers_did_not_answer(
    gone: bool, local: bool, mock_clock: trio.testing.MockClock
) -> None:
    """`devices: 2`: the first look's 20 Sybils are probed and do not answer; the next look reads the
    root again to its k closest and finds both honest workers, in the same round. On public addresses
    each Sybil's /24 is suspect then (`Hints.discount`); on local ones (a lab's loopback, an
    office's LAN) no network is, and the probes' own word (`unanswered`) is what reads the key again."""
    mock_clock.autojump_threshold = 0
    node = _Node(gone, local)
    config = DiscoveryConfig(want=2, count=2 * LOOKUP_SLACK, timeout_s=5.0)
    found = await Discovery(cast(Node, node), config).initial()
    assert {v.peer_id for v in found} >= set(HONEST)
    assert _everys(node.kad) == [ROOT]  # once: the second look's
