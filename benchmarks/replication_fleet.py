"""The replication simulation's fleet: who the peers are, what they advertise, where the submitter sees
them, and how they lie (`replication_sim.py` runs tasks over it).

Every peer has a real `DeviceProfile`, classed by `scheduler.verification.classes.device_class`. Two
strategies change what the cheaters advertise or where they sit, and the scheduler's own functions
then decide what that buys them:

- `one_host`: the cheaters of a class come in pairs, two keys on one machine, reporting one factor.
  Each pair is seen at the addresses a submitter would see: the first pair on loopback (127.0.0.1 and
  127.0.0.2), then in turn two keys on one IPv4 address, two addresses of one IPv6 /64, and a v4
  address beside its `::ffff:` form. Every peer's host is what `scheduler.state.replication.candidate`
  makes of its address (`networks.network_of`, never the string), and `replicas.pick_replicas` places.
- `unique`: each cheater advertises a CPU name no other peer has (a class of one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from protocol import ComputeUnit, DeviceProfile, Owner
from protocol.values import Calibration, UnitStatus
from scheduler.language import Draws
from scheduler.language.verify import Verify
from scheduler.state.replication import candidate
from scheduler.verification import Candidate, device_class

BOARD_CV = 0.01
UNIT = ComputeUnit.CPU_ONNX
PAIR_KINDS = ("one IPv4 address", "one IPv6 /64", "v4 and its ::ffff: form")
"""How a pair of keys shares one machine, in turn, after the first pair (on loopback)."""


@dataclass
class Peer:
    peer_id: str
    candidate: Candidate
    latency_ms: float  # its true latency (class latency x its board factor)
    cheat: float  # 1.0 honest, else the factor it reports


@dataclass(frozen=True)
class Seen:
    """A peer as the submitter's discovery saw it (a `verification.Advertised`)."""

    peer_id: str
    host: str
    profile: DeviceProfile
    owner: Owner = dataclasses.field(default_factory=Owner)


def profile_of(i: int, c: int, *, soc: str = "", cpu_gflops: float = 0.0) -> DeviceProfile:
    """Peer `i`'s profile in class `c` (its CPU `Cortex-X{c}` unless `soc` names another; a
    calibration when `cpu_gflops` is given)."""
    calibration = (
        Calibration(cpu_gflops=cpu_gflops, mem_bandwidth_gbs=20.0, seconds=1.0, quiet=True)
        if cpu_gflops
        else None
    )
    return DeviceProfile(
        device_name=f"board-{i}",
        soc=soc or f"Cortex-X{c}",
        cores_physical=4,
        cores_logical=4,
        ram_mb=8192,
        os="Linux",
        os_version="6.1.0",
        runtimes={"onnxruntime": "1.31.1"},
        fingerprint=f"fp-{i}",
        units=(UnitStatus(unit=UNIT, usable=True, provider="CPUExecutionProvider"),),
        calibration=calibration,
    )


def fleet(
    draws: Draws, peers: int, classes: int, cheaters: float, *, sybil: bool = False, poison: bool = False
) -> list[Peer]:
    """Peers with real profiles, `classes` classes told apart by their CPU, hosts and cheat factors
    (with `sybil`, every cheater of a class reports its class's one owner's factor; with `poison`,
    0.5x)."""
    owners = [0.5 + 0.4 * draws.uniform() for _ in range(classes)]
    out: list[Peer] = []
    for i in range(peers):
        c = i % classes
        profile = profile_of(i, c)
        shared = i < peers * 0.02  # one owner, three keys a host
        host = f"10.0.{(i // 3) % 256}.{i // 768}" if shared else f"host-{i}"
        cheat = 0.5 + 0.4 * draws.uniform() if draws.uniform() < cheaters else 1.0
        cheat = owners[c] if sybil and cheat < 1.0 else cheat
        cheat = 0.5 if poison and cheat < 1.0 else cheat
        latency = (5.0 + 5.0 * c) * draws.normal(1.0, BOARD_CV)
        out.append(
            Peer(f"peer-{i}", Candidate(f"peer-{i}", device_class(profile, UNIT), host), latency, cheat)
        )
    return out


def with_references(draws: Draws, everyone: list[Peer], classes: int) -> list[Peer]:
    """One more honest peer per class, on its own network: the submitter's reference device (its
    board factor from `draws`, a stream apart from the fleet's)."""
    refs = []
    for c in range(classes):
        member = everyone[c]
        refs.append(
            Peer(
                f"ref-{c}",
                Candidate(f"ref-{c}", member.candidate.device_class, f"reference-{c}"),
                (5.0 + 5.0 * c) * draws.normal(1.0, BOARD_CV),
                1.0,
            )
        )
    return [*everyone, *refs]


def pair_addresses(k: int) -> tuple[str, str]:
    """The two addresses the submitter sees for the two keys of pair `k` on one machine."""
    if k == 0:
        return "127.0.0.1", "127.0.0.2"
    kind = PAIR_KINDS[(k - 1) % len(PAIR_KINDS)]
    if kind == "one IPv4 address":
        return f"203.0.{k % 256}.9", f"203.0.{k % 256}.9"
    if kind == "one IPv6 /64":
        return f"2001:db8:{k:x}::1", f"2001:db8:{k:x}::beef:2"
    return f"198.51.{k % 256}.5", f"::ffff:198.51.{k % 256}.5"


def address_of(peer: Peer, index: int) -> str:
    """An address for a peer not in a pair: the fleet's shared hosts keep theirs (three keys on one
    address), each other peer a /24 of its own, each reference another."""
    host = peer.candidate.host
    if peer.peer_id.startswith("ref-"):
        return f"192.0.{int(peer.peer_id[4:]) % 256}.10"
    if host.startswith("10.0."):
        return host
    return f"100.{64 + (index // 256) % 64}.{index % 256}.1"


def one_host(everyone: list[Peer], classes: int) -> tuple[list[Peer], dict[str, str]]:
    """The fleet with its cheaters paired on one machine each (two keys, one factor: the first's)
    and every host as the scheduler makes it of the address it sees; and each pair's machine, by
    peer id."""
    cheaters = [
        [p for p in everyone if p.cheat < 1.0 and _class_index(p, classes) == c] for c in range(classes)
    ]
    addresses = {p.peer_id: address_of(p, i) for i, p in enumerate(everyone)}
    factor: dict[str, float] = {}
    machines: dict[str, str] = {}
    k = 0
    for members in cheaters:
        for a, b in zip(members[::2], members[1::2], strict=False):
            addresses[a.peer_id], addresses[b.peer_id] = pair_addresses(k)
            factor[b.peer_id] = a.cheat
            machines[a.peer_id] = machines[b.peer_id] = f"machine-{k}"
            k += 1
    out = []
    for i, p in enumerate(everyone):
        profile = profile_of(i, _class_index(p, classes))
        seen = candidate(Seen(p.peer_id, addresses[p.peer_id], profile), UNIT, Verify(replicas=2))
        out.append(dataclasses.replace(p, candidate=seen, cheat=factor.get(p.peer_id, p.cheat)))
    return out, machines


def unique(everyone: list[Peer], classes: int) -> list[Peer]:
    """The fleet with each cheater advertising a CPU name of its own (`Cortex-X{c} custom {i}`): its
    class, by `classes.device_class`, is a class of one."""
    out = []
    for i, p in enumerate(everyone):
        if p.cheat < 1.0:
            c = _class_index(p, classes)
            profile = profile_of(i, c, soc=f"Cortex-X{c} custom {i}")
            p = dataclasses.replace(
                p, candidate=Candidate(p.peer_id, device_class(profile, UNIT), p.candidate.host)
            )
        out.append(p)
    return out


def _class_index(peer: Peer, classes: int) -> int:
    """The class a fleet peer was made in (`peer-{i}`: i mod `classes`; `ref-{c}`: c)."""
    if peer.peer_id.startswith("ref-"):
        return int(peer.peer_id.removeprefix("ref-"))
    return int(peer.peer_id.removeprefix("peer-")) % classes
