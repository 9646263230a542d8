"""Circuit relay v2 as our hosts run it: the limits of a circuit, who may reserve a slot (T16), how
many slots a gate holds, and why a reservation was refused.

py-libp2p 0.8.1's relay reserves a slot for any peer, and for whatever peer id the request names, and
its defaults allow 1 GiB and 3600 s per circuit. A gate relays control traffic only (model bytes
never cross a relay), so its circuits are small and short, and `GateRelay` reserves only for the
Noise-authenticated caller, and only if the allowlist (`HostConfig.relay_allow`) names it.

Capacity: a gate holds `GATE_RESERVATIONS` slots (`gate --max-reservations`), one per NAT'd worker that joined
it and is still connected (py-libp2p's own default is 4, and it counted a departed peer's slot until its TTL:
`GateRelay._drop_departed`). A dialler takes none (no client role: `relay_config`). A reservation is a line in
the relay's table; the NAT'd worker's connection to the gate, which it holds anyway, is what it costs (counted
in the gate's connection cap, P33). Past the last slot the gate answers RESOURCE_LIMIT_EXCEEDED; py-libp2p's
client reads any refusal as `False` and logs the code, so the reserving side reads the gate's answer itself
(`refusal`), and a worker says which gate refused and why.

Spread (issue 50): a NAT'd worker holds slots at `RELAY_GATES` of its gates, drawn in a random order
(`reserve_spread`), not at every gate it lists: with G gates listed by every device, a slot at each took
G slots a device, and the same first devices filled every gate.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.config import RelayConfig, RelayRole
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage, Status
from libp2p.relay.circuit_v2.protocol import CircuitV2Protocol
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode, to_proto_status
from libp2p.relay.circuit_v2.resources import RelayLimits
from libp2p.relay.circuit_v2.utils import write_delimited_msg

from node.errors import NodeError, PeerUnreachable, RelayFull

log = logging.getLogger(__name__)

GATE_RESERVATIONS: Final = 1024
"""Relay slots a gate holds at once, one per NAT'd worker that joined it: half its connection cap."""
RELAY_GATES: Final = 2
"""Gates at which a NAT'd worker holds a relay slot at once: two, so that a gate lost leaves it reachable
through the other while it replaces that slot, and 32 submitters may reach it at once (16 circuits a slot)."""


def relay_limits(reservations: int = GATE_RESERVATIONS) -> RelayLimits:
    """A gate's circuits: control traffic only (py-libp2p's defaults are 1 GiB and 3600 s a circuit)."""
    return RelayLimits(
        duration=300, data=16 << 20, max_circuit_conns=16, max_reservations=reservations, reservation_ttl=600
    )


REFUSALS: Final = {
    "RESOURCE_LIMIT_EXCEEDED": "the gate's relay is full (every slot taken: `gate --max-reservations`)",
    "PERMISSION_DENIED": "the gate relays only for the peers on its `--relay-allow` list",
    "RESERVATION_REFUSED": "the gate refused the reservation",
}


def refusal(gate: str, answer: bytes) -> PeerUnreachable:
    """Why `gate` refused a reservation, from the bytes of its answer (a varint-delimited HopMessage):
    `RelayFull` when every slot is taken."""
    try:
        length, used = _uvarint(answer)
        message = HopMessage.FromString(answer[used : used + length])
    except Exception:
        return PeerUnreachable(
            gate, f"relay reservation refused: {'its answer could not be read' if answer else 'no answer'}"
        )
    name = Status.Name(message.status) if message.status in Status.values() else str(message.status)
    why = f"relay reservation refused: {REFUSALS.get(name, 'refused')} ({name})"
    return RelayFull(gate, why) if name == "RESOURCE_LIMIT_EXCEEDED" else PeerUnreachable(gate, why)


def _uvarint(data: bytes) -> tuple[int, int]:
    value = shift = 0
    for i, byte in enumerate(data[:10]):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise ValueError("no varint")


@final
class GateRelay(CircuitV2Protocol):
    """Circuit relay v2 whose reservations go only to the authenticated, allowlisted caller (T16)."""

    def __init__(
        self, lp: Any, *, hop: bool, allow: frozenset[str] | None, reservations: int = GATE_RESERVATIONS
    ) -> None:
        super().__init__(lp, limits=relay_limits(reservations), allow_hop=hop)
        self._allow = allow

    async def _handle_reserve(self, stream: Any, msg: Any) -> None:
        caller = stream.muxed_conn.peer_id
        named = ID(msg.peer.id) if msg.HasField("peer") and msg.peer.id else caller
        if named != caller or (self._allow is not None and caller.to_base58() not in self._allow):
            log.info("relay reservation refused to %s (for %s)", caller, named)
            denied = HopMessage(type=HopMessage.STATUS, status=to_proto_status(StatusCode.PERMISSION_DENIED))
            await write_delimited_msg(stream, denied)
            return
        self._drop_departed()
        await super()._handle_reserve(stream, msg)

    def _drop_departed(self) -> None:
        """Free the slots of peers no longer connected to the gate. The spec holds a reservation valid
        only while its peer keeps a connection to the relay, and go-libp2p drops it on disconnect;
        py-libp2p 0.8.1 counts a departed peer's slot until its TTL (`reservation_ttl`, 600 s), so a
        gate's slots filled with workers that had left, or with keys that reserved and hung up.

        Cheater's view: keys are free, connections are not. A stranger now holds a slot only while it
        holds a connection, and the gate's connections from one address are bounded by its share
        (`--max-per-address`), so one address can no longer take every slot by reserving and leaving."""
        table = self.resource_manager._reservations
        if len(table) < self.resource_manager.limits.max_reservations:
            return  # room left: nothing to free (the scan is paid only by a full relay)
        for peer in [p for p in table if not self.resource_manager._is_peer_connected(p)]:
            del table[peer]


def relay_config(hop: bool, reservations: int = GATE_RESERVATIONS) -> RelayConfig:
    """Every host stops and dials circuits; a gate (`hop`) also relays them.

    No host takes py-libp2p's client role. With it, each circuit dial first reserves a slot at the relay
    for the dialler (held for the reservation's TTL, 600 s at our gates) and relay discovery reserves at every
    relay it finds: a submitter, a probe or `peers` took a slot at each gate it dialled a worker
    through, and NAT'd workers found the gate full. A worker reserves on purpose (`Host.reserve_relay`,
    at `RELAY_GATES` of its gates); dialling a circuit needs no slot of the dialler's own.
    """
    roles = RelayRole.STOP
    return RelayConfig(roles=roles | RelayRole.HOP if hop else roles, limits=relay_limits(reservations))


@dataclass(frozen=True)
class Reserved:
    """What `reserve_spread` got: the circuits held (those held before first), each gate that refused."""

    circuits: tuple[str, ...]
    refused: tuple[tuple[str, str], ...] = ()
    """(gate, why) for each gate tried that refused a slot (full, not on its list) or failed to answer."""
    full: tuple[str, ...] = ()
    """The gates among those that refused because every slot was taken (`RelayFull`)."""


async def reserve_spread(
    gates: Sequence[str],
    held: Sequence[str],
    reserve: Callable[[str], Awaitable[str]],
    rng: random.Random,
    want: int = RELAY_GATES,
) -> Reserved:
    """Hold relay slots at `want` of `gates`: the gates not yet `held` in a random order, the next one
    when a gate refuses or fails, until `want` circuits are held or every gate was tried.

    `reserve(gate)` returns our circuit address through the gate (`Host.reserve_relay`) or raises a
    `NodeError` saying why not. Devices that list the same gates draw different ones, so G gates hold
    about G / `want` times the NAT'd devices that a slot at every gate left room for.

    Cheater's view: a device chooses its own gates anyway (it may reserve at any gate, at every gate,
    or at none), and nobody reads the order it drew; the rule only keeps an honest device from taking
    more slots than it needs. It gives a stranger nothing: the draw is the device's own, from `rng`
    (the node's: the operating system's randomness), and a gate's slots are still open to whoever
    asks first (a gate's `--relay-allow` list is what keeps strangers' keys off them).
    """
    circuits = list(held)
    taken = {circuit_gate(c) for c in circuits}
    order = [g for g in dict.fromkeys(gates) if g not in taken]
    rng.shuffle(order)
    refused: list[tuple[str, str]] = []
    full: list[str] = []
    for gate in order:
        if len(circuits) >= want:
            break
        try:
            circuits.append(await reserve(gate))
        except NodeError as exc:
            refused.append((gate, exc.detail))
            if isinstance(exc, RelayFull):
                full.append(gate)
    return Reserved(tuple(circuits), tuple(refused), tuple(full))


def short_of_slots(circuits: Sequence[str], gates: Sequence[str], want: int = RELAY_GATES) -> bool:
    """Whether `circuits` are fewer than the `want` slots that `gates` can give (a worker with one gate
    wants one slot, not two it can never hold, and is not asking again forever)."""
    return len(circuits) < min(want, len(dict.fromkeys(gates)))


def circuit_gate(circuit: str) -> str:
    """The gate address a circuit address goes through."""
    return circuit.split("/p2p-circuit", 1)[0]
