"""`/sark/reach/1.0.0` on the gate: dial a caller back from a throwaway identity (see `node.p2p.reach`).

The gate keeps one probe host for its dial-backs; the handler and the address rules live in
`node.p2p.reach`, which workers serve too (a gate of another libp2p implementation has no `/sark/reach`).
"""

from __future__ import annotations

from node.p2p.reach import dial_back_addrs, reach_handler

__all__ = ["dial_back_addrs", "reach_handler"]
