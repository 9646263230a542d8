"""When a refresh reuses a key's closest servers and when it walks (`node.p2p.closest`, pure)."""

from __future__ import annotations

from node.config import NodeConfig
from node.p2p.closest import MIN_KEPT, REWALK_EVERY, REWALK_S, ClosestServers, rewalk_every

KEY = b"key"
SERVERS = tuple(f"s{i}" for i in range(20))


def test_a_walk_is_reused_until_every_kth_announcement() -> None:
    closest = ClosestServers()
    assert closest.reuse(KEY) is None  # never walked
    closest.walked(KEY, SERVERS)
    reused = [closest.reuse(KEY) for _ in range(REWALK_EVERY)]
    assert reused[: REWALK_EVERY - 1] == [SERVERS] * (REWALK_EVERY - 1)
    assert reused[-1] is None  # the REWALK_EVERY-th announcement walks


def test_failed_servers_are_dropped_and_too_few_left_walks() -> None:
    closest = ClosestServers()
    closest.walked(KEY, SERVERS)
    closest.failed(KEY, SERVERS[:3])
    assert closest.reuse(KEY) == SERVERS[3:]  # the others still hold the record
    closest.failed(KEY, SERVERS[3 : len(SERVERS) - MIN_KEPT + 1])
    assert closest.reuse(KEY) is None  # fewer than MIN_KEPT left


def test_a_small_swarm_reuses_the_few_servers_it_has() -> None:
    closest = ClosestServers()
    closest.walked(KEY, ("gate",))
    assert closest.reuse(KEY) == ("gate",)
    closest.failed(KEY, ("gate",))
    assert closest.reuse(KEY) is None  # none left


def test_a_walk_comes_about_every_rewalk_s_whatever_the_refresh_period() -> None:
    for period in (60.0, 175.0, NodeConfig().reannounce_interval(), 1200.0):
        assert abs(rewalk_every(period) * period - REWALK_S) <= period / 2
    assert rewalk_every(REWALK_S * 4) == 2  # a walk, then at least one refresh to the same servers


def test_a_walk_of_a_small_swarm_is_walked_again_once_more_servers_are_known() -> None:
    closest = ClosestServers()
    closest.walked(KEY, ("gate",), servers=1)
    assert closest.reuse(KEY, servers=1) == ("gate",)  # the gate is all the swarm serves
    assert closest.reuse(KEY, servers=4) is None  # workers began to serve: the key's closest moved
    closest.walked(KEY, SERVERS[:19], servers=22)  # we serve too: the walk found 19 others
    assert closest.reuse(KEY, servers=22) == SERVERS[:19]  # not walked again while nobody new serves
    closest.walked(KEY, SERVERS, servers=20)
    assert closest.reuse(KEY, servers=300) == SERVERS  # k found: reused whatever the table


def test_servers_of_our_table_nearer_the_key_join_the_kept_ones() -> None:
    def distance(peer: str) -> int:
        return int(peer[1:])  # s0 is the nearest

    closest = ClosestServers()
    walked = tuple(f"s{i}" for i in range(10, 30))  # the k closest of the servers serving then
    closest.walked(KEY, walked)
    far = [f"s{i}" for i in range(30, 60)]  # a steady swarm: our table knows none nearer
    assert closest.nearer(KEY, far, distance) == walked
    joined = ["s3", "s12", *far]  # a server that joined later, nearer the key than most kept
    nearer = closest.nearer(KEY, joined, distance)
    assert nearer == ("s3", *walked[:-1])  # the k closest of both: the farthest kept drops out
    assert closest.reuse(KEY) == nearer  # and the refreshes after send there too
    assert ClosestServers().nearer(KEY, joined, distance) == ()  # never walked: nothing to add to
