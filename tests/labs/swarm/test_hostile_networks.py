"""Issue 50, scope 2, with real processes on real networks: hostile DHT servers on four networks near a
key, listing a full key of Sybils at once, end no walk before its honest holders answer.

Routed /24s in namespaces (tests/kit/routed.py, one host each): a `sark-node gate`; two honest
networks, each three honest servers and one honest provider placing its records with the node's own
`Dht.publish` under the any-worker tree's root key; then four hostile networks, each one process of four
hostile servers of this code (tests/kit/dhtservers.py: ids ground so that their first 8 bits are the
root key's, 16 of its 20 closest servers; they keep no record they are sent and answer every
GET_PROVIDERS at once with the same 20 Sybils, a full key's count); and the asker
(tests/kit/walker.py), a node of this code on a network of its own that walks to the root key 12
times under each rule, then keeps the key's first 20 as the node does (`Kad.lookup_providers`) and
runs discovery's own lookup.

- The rule before issue 50 (`short`) ends walks on the hostile answers with no honest provider:
  printed; the lab asserts only that the attack is real (some walk lost).
- Today's rule loses none: the count that ends a walk takes only providers listed by holders on more
  networks than the key's k closest still to answer (four networks that answered first are not
  enough while the honest holders are still answering), and what the node keeps of a key (its first
  20) is taken in turns, one provider from each network that listed any (ranked by networks alone,
  the Sybils' four would fill the first 20). On the rule before that change (3 networks end a walk at
  the count, first 20 by networks alone): 3 of 12 walks lost an honest provider, 0 honest kept.

The honest records are placed before the hostile servers come: the walk is under test here, a reader
of a key that honest holders hold. In a swarm this small every key's k closest hold most hostile
servers, and their four networks are more than half of the seven that answer: a provider placing its
records after them reads every key of its tree "full" of their Sybils and is listed nowhere (a
placement the hostile servers deny, not a walk they end; as a minority of the networks they deny none:
`test_hostile_places.py`).

The honest servers' ids share the key's first 2 bits, the gate's differs in its first (all ground:
`--ground-near`, `far_seed`), so that the key's closest after the hostile servers are honest servers,
never the gate. Then the honest servers answer 0.5 s late (a wide-area round trip away,
`--answer-delay`: netem does not exist on this kernel) and two hostile networks more come, one server
each: six networks of the key's 20 closest, more than its two honest holders there, which end the
node's walk with their Sybils alone (the stated limit of `node.p2p.shortlist`). A second asker runs a
submitter's discovery of two workers: its probes find the Sybils dead, and its next look reads the key
again by a walk that waits for every one of the key's k closest (`Hints.unanswered`), where
the honest holders list both workers. Its look asks for 2, not a campaign's 4 (`LOOKUP_SLACK`): in a
swarm this small the hostile servers are most of every key's holders, every key reads full of their
Sybils, and a look for 4 reads the whole tree past its deadline (what it found by then is kept,
`Node.find_providers`, but the look has no time left to probe it): a limit of a tiny swarm, where
hostile servers near every key are most of all servers. Without the second read (checked): every
walk lost both, and the discovery confirmed neither.

The cheater's view: the hostile servers see the key (a public string) and choose their ids, their
lists and how fast they answer; they hold four networks, then six, as many as they like but not all
of the key's k closest. What this lab does not stop: every one of the key's 20 closest hostile (no
reader's rule recovers records the writers sent only to them: `benchmarks/notes/swarm_hostile.md`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from kit.dhtservers import far_seed
from kit.netns import running
from kit.procs import Proc
from kit.routed import RoutedNet, SwarmLab, swarm_hosts

from node.p2p.shards import Shard
from scheduler.verification import network_of

KEY = Shard(None, 0, 0).dht_key
HOSTILE_NETWORKS = 4
HOSTILE_EACH = 4
HONEST_NETWORKS = 2
HONEST_EACH = 3
WALKS = 12
SYBILS = 20
HONEST_DELAY_S = 0.5
"""How late an honest server answers (a wide-area round trip away); hostile ones answer at once."""
MORE_NETWORKS = 2
"""Hostile networks that come after the first asker (one server each): six networks of the key's 20
closest, more than its honest holders there (two)."""
HOSTS = swarm_hosts(HONEST_NETWORKS, HOSTILE_NETWORKS + MORE_NETWORKS)
"""Each host on a /24 of its own: the gate, the asker, the honest networks `o*`, the hostile `x*`."""
Placed = tuple[SwarmLab, dict[str, Any], list[Proc]]
"""The lab, what it placed before the first asker, and the honest servers' processes."""
HOSTILE_FLAGS = ("--hostile-near", KEY.hex(), "--bits", "8", "--sybils", str(SYBILS), "--sybil-seed", "5b")


@pytest.fixture(scope="module")
def net() -> Iterator[RoutedNet]:
    yield from running(RoutedNet(hosts=HOSTS))


@pytest.fixture(scope="module")
def lab(net: RoutedNet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Placed]:
    """The gate, the honest servers and providers, the four hostile networks: the lab and what it
    placed (the honest providers, the hostile servers, the Sybils; "late": the honest servers'
    processes, which answer `HONEST_DELAY_S` late once signalled)."""
    lab = SwarmLab(net, tmp_path_factory.mktemp("hostilenets"), gate_seed=far_seed(KEY))
    try:
        servers = ["--servers", str(HONEST_EACH), "--answer-delay", str(HONEST_DELAY_S)]
        servers += ["--ground-near", KEY.hex(), "--bits", "2"]  # the key's closest after the hostile
        late = [lab.servers(f"o{i}", f"o{i}", *servers) for i in range(HONEST_NETWORKS)]
        for proc in late:
            proc.wait_event("ready", 180)
        # then a provider on each network: placed on every honest server
        honest = [lab.servers(f"p{i}", f"o{i}", "--providers", "1") for i in range(HONEST_NETWORKS)]
        good = [proc.wait_event("ready", 180) for proc in honest]
        hostile = ["--servers", str(HOSTILE_EACH), *HOSTILE_FLAGS]
        bad = [lab.servers(f"x{i}", f"x{i}", *hostile) for i in range(HOSTILE_NETWORKS)]
        ready = [proc.wait_event("ready", 180) for proc in bad]
        placed = {
            "hostile": {s for r in ready for s in r["servers"]},
            "sybils": set(ready[0]["sybils"]),
            "providers": {p for r in good for p in r["providers"]},
        }
        yield lab, placed, late
    finally:
        lab.close()


@pytest.fixture(scope="module")
def walked(lab: Placed) -> dict[str, Any]:
    swarm, placed, _ = lab
    return {**swarm.walker(KEY, "--walks", str(WALKS)).wait_event("walked", 240), **placed}


@pytest.fixture(scope="module")
def outnumbered(lab: Placed, walked: dict[str, Any]) -> dict[str, Any]:
    """After the first asker: two hostile networks more, one server each (18 hostile servers on six
    networks among the key's 20 closest), and a second asker that walks and runs a submitter's
    discovery of two workers (`walker.py --discover`)."""
    swarm, placed, honest = lab
    for proc in honest:  # from now on a wide-area round trip away: the hostile servers answer first
        proc.popen.send_signal(signal.SIGUSR1)
        proc.wait_event("late", 30)
    more = ["--servers", "1", *HOSTILE_FLAGS]
    hosts = [f"x{HOSTILE_NETWORKS + i}" for i in range(MORE_NETWORKS)]
    late = [swarm.servers(host, host, *more) for host in hosts]
    ready = [proc.wait_event("ready", 180) for proc in late]
    asker = swarm.walker(KEY, "--walks", str(WALKS), "--discover", name="walker2")
    return {**asker.wait_event("walked", 240), **placed, "late": {s for r in ready for s in r["servers"]}}


def test_hostile_servers_on_four_networks_near_a_key_end_no_walk_before_its_honest_holders(
    walked: dict[str, Any],
) -> None:
    honest, sybils = walked["providers"], walked["sybils"]
    assert len(honest) == HONEST_NETWORKS
    assert len(sybils) == SYBILS
    seen = {walked["networks"][s] for s in walked["hostile"] if s in walked["networks"]}
    assert seen == {
        network_of(HOSTS[f"x{i}"][0]) for i in range(HOSTILE_NETWORKS)
    }  # four, as the walk saw them
    lost = {rule: sum(not honest <= set(found) for found in walks) for rule, walks in walked["walks"].items()}
    for found in (f for walks in walked["walks"].values() for f in walks):
        assert set(found) <= honest | sybils
    kept = set(walked["kept"])
    print(
        f"\n{HOSTILE_NETWORKS * HOSTILE_EACH} hostile servers on {HOSTILE_NETWORKS} networks near the root "
        f"key, {walked['table']} in the asker's table; walks losing an honest provider: before "
        f"{lost['before']}/{WALKS}, now {lost['now']}/{WALKS}; kept {len(kept & honest)} honest of "
        f"{len(kept)}"
    )
    assert lost["now"] == 0
    assert lost["before"] > 0  # the attack is real: the rule before lost walks to it
    assert honest <= kept  # each network keeps its share of the key's first 20, in turns
    assert honest <= set(walked["looked"])  # discovery's own lookup finds both


def test_hostile_servers_on_more_networks_than_a_keys_honest_holders_deny_no_discovery(
    outnumbered: dict[str, Any],
) -> None:
    """Six hostile networks of the key's 20 closest, two honest holders among them: the node's walk
    ends at the count the hostile networks vouch for before the honest holders answer (the stated
    limit of `node.p2p.shortlist`): the asker's walks lose both honest providers (12 of 12 in the runs
    here). A submitter's discovery probes what its first look found (the Sybils, where nothing
    listens), and its next look reads the key again by a walk that waits for every one of its k
    closest (`Hints.unanswered`): it confirms both honest workers. Without that second read
    (its looks read below the key, where no one is: 64 walks) it confirmed neither.

    Whether the discovery's own quick walks lose as the asker's did is the machine's to say: on a
    loaded one the hostile servers' processes wait for a CPU as the honest ones do, and a quick walk
    may hear the honest holders first (a loaded run at 528b7f90: the asker's walks lost 12 of 12, the
    discovery's first look listed both). So the second read is asserted where the discovery's own
    quick walks listed Sybils alone, never inferred from the asker's walks; the unit tests pin it on
    trio's virtual clock (`tests/unit/node/submitter/test_hostile_holders.py`)."""
    honest, found = outnumbered["providers"], outnumbered["discovered"]
    networks = {outnumbered["networks"][s] for s in outnumbered["late"] if s in outnumbered["networks"]}
    assert len(networks) == MORE_NETWORKS  # the late hostile servers, as the asker saw them
    lost = sum(not honest & set(f) for f in outnumbered["walks"]["now"])
    print(
        f"\n{HOSTILE_NETWORKS + MORE_NETWORKS} hostile networks near the root key: walks with no honest "
        f"provider {lost}/{WALKS}; discovery confirmed {len(set(found['workers']) & honest)} of "
        f"{len(honest)} honest workers, {found['every']} of {found['walks']} walks to every holder"
    )
    # each walk: key, every, began, ended, honest listed, listed, answered, failures
    trace = [(*t[:4], len(set(t[4]) & honest), len(t[4]), *t[5:]) for t in found["trace"]]
    assert honest <= set(found["workers"]), trace
    if not any(honest & set(t[4]) for t in found["trace"] if not t[1]):  # its quick walks: Sybils alone
        assert any(honest & set(t[4]) for t in found["trace"] if t[1]), trace  # its second read found them
