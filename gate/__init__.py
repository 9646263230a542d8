"""The gate role: bootstrap, DHT server, circuit relay v2 hop, reachability dial-back.

Modules:
    reach  `/sark/reach/1.0.0`: dial a caller back from a throwaway identity
    serve  `open_gate`, `serve_gate`: the whole gate, built on `node`'s host
"""

from __future__ import annotations

from gate.reach import dial_back_addrs, reach_handler
from gate.serve import open_gate, serve_gate

__all__ = ["dial_back_addrs", "open_gate", "reach_handler", "serve_gate"]
