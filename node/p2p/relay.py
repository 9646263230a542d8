"""Circuit relay v2 as our hosts run it: the limits of a circuit, and who may reserve a slot (T16).

py-libp2p 0.8.1's relay reserves a slot for any peer, and for whatever peer id the request names, and
its defaults allow 1 GiB and 3600 s per circuit. A gate relays control traffic only (model bytes
never cross a relay), so its circuits are small and short, and `GateRelay` reserves only for the
Noise-authenticated caller, and only if the allowlist (`HostConfig.relay_allow`) names it.
"""

from __future__ import annotations

import logging
from typing import Any, Final, final

from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.config import RelayConfig, RelayRole
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage
from libp2p.relay.circuit_v2.protocol import CircuitV2Protocol
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode, to_proto_status
from libp2p.relay.circuit_v2.resources import RelayLimits
from libp2p.relay.circuit_v2.utils import write_delimited_msg

log = logging.getLogger(__name__)

RELAY_LIMITS: Final = RelayLimits(
    duration=300, data=16 << 20, max_circuit_conns=16, max_reservations=64, reservation_ttl=600
)
"""A gate's circuits: control traffic only (py-libp2p's defaults are 1 GiB and 3600 s a circuit)."""


@final
class GateRelay(CircuitV2Protocol):
    """Circuit relay v2 whose reservations go only to the authenticated, allowlisted caller (T16)."""

    def __init__(self, lp: Any, *, hop: bool, allow: frozenset[str] | None) -> None:
        super().__init__(lp, limits=RELAY_LIMITS, allow_hop=hop)
        self._allow = allow

    async def _handle_reserve(self, stream: Any, msg: Any) -> None:
        caller = stream.muxed_conn.peer_id
        named = ID(msg.peer.id) if msg.HasField("peer") and msg.peer.id else caller
        if named != caller or (self._allow is not None and caller.to_base58() not in self._allow):
            log.info("relay reservation refused to %s (for %s)", caller, named)
            refusal = HopMessage(type=HopMessage.STATUS, status=to_proto_status(StatusCode.PERMISSION_DENIED))
            await write_delimited_msg(stream, refusal)
            return
        await super()._handle_reserve(stream, msg)


def relay_config(hop: bool) -> RelayConfig:
    """Every host stops and dials circuits; a gate (`hop`) also relays them."""
    roles = RelayRole.STOP | RelayRole.CLIENT
    return RelayConfig(roles=roles | RelayRole.HOP if hop else roles, limits=RELAY_LIMITS)
