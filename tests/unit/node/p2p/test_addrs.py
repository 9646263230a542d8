"""node.p2p.addrs and node.p2p.dial's plan: which addresses we announce, in which order a peer's are dialled.

Pure functions, table-driven: interfaces are given, nothing asks the system (P29, P30).
"""

from __future__ import annotations

from ipaddress import ip_interface

import multiaddr
import pytest

from node.p2p.addrs import (
    AddressBook,
    IPInterface,
    announced,
    dial_order,
    expand,
    local_interfaces,
    scope,
    undialable,
)
from node.p2p.dial import MAX_CIRCUITS, MAX_DIRECT, Sightings, dial_plan
from node.p2p.reach import dial_back_addrs

LO = ip_interface("127.0.0.1/8")
LO6 = ip_interface("::1/128")
LAN = ip_interface("192.168.1.5/24")
LAN6 = ip_interface("fd00::2/64")
LINK = ip_interface("169.254.3.4/16")
LINK6 = ip_interface("fe80::1/64")
PUBLIC = ip_interface("93.184.216.34/24")
CGNAT = ip_interface("100.64.0.5/10")
ALL: list[IPInterface] = [LO, LO6, LAN, LAN6, LINK, LINK6, PUBLIC, CGNAT]


@pytest.mark.parametrize(
    ("listen", "local", "expected"),
    [
        pytest.param(
            ["/ip4/0.0.0.0/tcp/4001"],
            ALL,
            ["/ip4/127.0.0.1/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/93.184.216.34/tcp/4001",
             "/ip4/100.64.0.5/tcp/4001"],
            id="ip4 wildcard: every ip4 interface but link-local, in interface order",
        ),
        pytest.param(
            ["/ip6/::/tcp/5"], ALL, ["/ip6/::1/tcp/5", "/ip6/fd00::2/tcp/5"], id="ip6 wildcard: no fe80"
        ),
        pytest.param(["/ip4/0.0.0.0/tcp/7"], [LINK, LAN6], [], id="no usable interface: nothing"),
        pytest.param(["/ip4/10.0.0.1/tcp/1"], ALL, ["/ip4/10.0.0.1/tcp/1"], id="a bound address as it is"),
        pytest.param(["/dns4/gate.example/tcp/1"], ALL, ["/dns4/gate.example/tcp/1"], id="a name as it is"),
        pytest.param(
            ["/ip4/0.0.0.0/tcp/1", "/ip4/127.0.0.1/tcp/2"],
            [LO, LAN],
            ["/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.5/tcp/1", "/ip4/127.0.0.1/tcp/2"],
            id="several listen addresses",
        ),
    ],
)  # fmt: skip
def test_expand(listen: list[str], local: list[IPInterface], expected: list[str]) -> None:
    assert expand(listen, local) == expected


@pytest.mark.parametrize(
    ("addr", "rank"),
    [
        ("/ip4/93.184.216.34/tcp/1", 0),
        ("/dns4/gate.example/tcp/1", 0),
        ("/ip6/2606:4700::1/tcp/1", 0),
        ("/ip4/10.77.0.12/tcp/1", 1),
        ("/ip4/100.64.0.5/tcp/1", 1),
        ("/ip6/fd00::2/tcp/1", 1),
        ("/ip4/169.254.3.4/tcp/1", 2),
        ("/ip4/127.0.0.1/tcp/1/p2p/12D3KooWx", 3),
        ("/ip6/::1/tcp/1", 3),
    ],
)
def test_scope_ranks_public_then_private_then_link_local_then_loopback(addr: str, rank: int) -> None:
    assert scope(addr) == rank


@pytest.mark.parametrize(
    ("listen", "local", "observed", "expected"),
    [
        pytest.param(
            ["/ip4/0.0.0.0/tcp/4001"],
            [LO, LAN, PUBLIC, CGNAT],
            [],
            ["/ip4/93.184.216.34/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/100.64.0.5/tcp/4001",
             "/ip4/127.0.0.1/tcp/4001"],
            id="public first, loopback last",
        ),
        pytest.param(
            ["/ip4/0.0.0.0/tcp/4001"],
            [LO, LAN],
            ["/ip4/198.51.100.200/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/93.184.216.34/tcp/4001"],
            ["/ip4/93.184.216.34/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/198.51.100.200/tcp/4001",
             "/ip4/127.0.0.1/tcp/4001"],
            id="observed addresses ranked with the rest, each once",
        ),
        pytest.param(
            ["/ip4/0.0.0.0/tcp/1"], [LO], ["/ip4/0.0.0.0/tcp/1"], ["/ip4/127.0.0.1/tcp/1"],
            id="never an unspecified address",
        ),
        pytest.param(["/ip4/0.0.0.0/tcp/1"], [], [], [], id="nothing to announce"),
    ],
)  # fmt: skip
def test_announced(
    listen: list[str], local: list[IPInterface], observed: list[str], expected: list[str]
) -> None:
    assert announced(listen, local, observed) == expected


@pytest.mark.parametrize(
    ("addrs", "local", "expected"),
    [
        pytest.param(
            ["/ip4/93.184.216.34/tcp/1", "/ip4/10.77.0.12/tcp/1", "/ip4/127.0.0.1/tcp/1"],
            [LO, ip_interface("10.77.0.11/24")],
            ["/ip4/10.77.0.12/tcp/1", "/ip4/93.184.216.34/tcp/1", "/ip4/127.0.0.1/tcp/1"],
            id="a peer on our LAN: its LAN address first",
        ),
        pytest.param(
            ["/ip4/93.184.216.34/tcp/1", "/ip4/10.77.0.12/tcp/1", "/ip4/127.0.0.1/tcp/1"],
            [LO, LAN],
            ["/ip4/93.184.216.34/tcp/1", "/ip4/10.77.0.12/tcp/1", "/ip4/127.0.0.1/tcp/1"],
            id="a peer elsewhere: its own ranking",
        ),
        pytest.param(
            ["/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.5/tcp/1"],
            [LO, LAN],
            ["/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.5/tcp/1"],
            id="this machine (it advertises our own address): loopback first",
        ),
        pytest.param(
            ["/ip6/fd00::9/tcp/1", "/ip4/192.168.1.9/tcp/1"],
            [LAN6],
            ["/ip6/fd00::9/tcp/1", "/ip4/192.168.1.9/tcp/1"],
            id="families apart",
        ),
    ],
)  # fmt: skip
def test_dial_order(addrs: list[str], local: list[IPInterface], expected: list[str]) -> None:
    assert dial_order(addrs, local) == expected


def test_dial_plan_dials_direct_addresses_before_circuits_and_the_peerstore_when_none() -> None:
    circuit = "/ip4/10.77.0.11/tcp/4001/p2p/GATE/p2p-circuit/p2p/W"
    direct = ["/ip4/127.0.0.1/tcp/1/p2p/W", "/ip4/10.77.0.12/tcp/1/p2p/W"]
    assert dial_plan([circuit, *direct], [ip_interface("10.77.0.11/24")]) == [direct[1], direct[0], circuit]
    assert dial_plan([], []) == [None]


def test_dial_plan_dials_a_few_addresses_where_the_peer_was_seen_first() -> None:
    decoys = [f"/ip4/10.0.0.{i}/tcp/{i}/p2p/W" for i in range(1, 16)]
    real = "/ip4/192.0.2.7/tcp/4001/p2p/W"
    circuits = [f"/ip4/198.51.100.{i}/tcp/1/p2p/R{i}/p2p-circuit/p2p/W" for i in range(5)]
    plan = dial_plan([*decoys, real, *circuits], [])
    assert plan == [*decoys[:MAX_DIRECT], *circuits[:MAX_CIRCUITS]]  # as many as it lists: a few
    sightings = Sightings()
    sightings.saw("W", real, None)  # a connection was made there, or the DHT's record gave it
    assert dial_plan([*decoys, real], [], sightings.of("W"))[0] == real
    same_ip = "/ip4/192.0.2.7/tcp/9/p2p/W"  # the seen address itself first, then its IP
    assert dial_plan([*decoys, same_ip, real], [], sightings.of("W"))[:2] == [real, same_ip]
    assert dial_plan([real, real, real], []) == [real]


GATE_ELSEWHERE = "/ip4/10.77.0.11/tcp/4001/p2p/GATE"
GATE_HERE = "/ip4/127.0.0.1/tcp/4001/p2p/GATE"


@pytest.mark.parametrize(
    ("addrs", "circuits", "gates", "why"),
    [
        ([], [], [GATE_ELSEWHERE], "no address"),
        (["/ip4/127.0.0.1/tcp/1/p2p/W"], [], [GATE_ELSEWHERE], "only loopback"),
        (["/ip4/127.0.0.1/tcp/1/p2p/W"], [], [GATE_HERE], None),
        ([], [f"{GATE_ELSEWHERE}/p2p-circuit/p2p/W"], [GATE_ELSEWHERE], None),
        (["/ip4/10.77.0.12/tcp/1/p2p/W", "/ip4/127.0.0.1/tcp/1/p2p/W"], [], [GATE_ELSEWHERE], None),
    ],
)
def test_undialable_says_why_no_submitter_can_dial_a_worker(
    addrs: list[str], circuits: list[str], gates: list[str], why: str | None
) -> None:
    said = undialable(addrs, circuits, gates)
    assert said is None if why is None else why in (said or "")


def test_dial_backs_stay_at_the_observed_ip_in_its_family() -> None:
    claimed = ("/ip6/fd00::2/tcp/7/p2p/W", "/ip4/192.168.1.5/tcp/7/p2p/W", "/ip4/192.168.1.5/tcp/8/p2p/W")
    assert dial_back_addrs("fd00::2", "W", claimed) == [f"/ip6/fd00::2/tcp/{p}/p2p/W" for p in (7, 8)]
    assert dial_back_addrs("10.0.0.9", "W", claimed) == [f"/ip4/10.0.0.9/tcp/{p}/p2p/W" for p in (7, 8)]


def test_this_machine_has_a_running_loopback_interface() -> None:
    found = local_interfaces()
    assert any(i.ip.is_loopback for i in found), found
    assert all(not i.ip.is_unspecified for i in found)


def test_an_address_a_gate_reached_us_at_is_announced_with_the_interfaces() -> None:
    book = AddressBook()
    book.reached_at("/ip4/198.51.100.7/tcp/4001/p2p/12D3KooWx")  # a NAT forwarding our port
    book.reached_at("/ip4/198.51.100.7/tcp/4001/p2p/12D3KooWx")
    out = [str(a) for a in book.announce([multiaddr.Multiaddr("/ip4/0.0.0.0/tcp/4001")])]
    assert out.count("/ip4/198.51.100.7/tcp/4001") == 1
    assert out[-1] == "/ip4/127.0.0.1/tcp/4001"
    assert not any("/0.0.0.0/" in a for a in out)
