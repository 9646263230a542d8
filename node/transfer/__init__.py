"""Model bytes: the content-addressed cache, /sark/blob serving and fetching, URL policy and download.

Modules:
    cache       the content-addressed model cache
    blob        /sark/blob/1.0.0 serving: upload slots, one range per stream
    blob_fetch  /sark/blob/1.0.0 fetching: parallel ranges from holders, resumable, digest while receiving
    urls        which model URLs a worker may fetch (the SSRF policy)
    fetch       model downloads over checked addresses, capped and verified
    endpoints   a black-box model server's URL checked by the same policy, resolved to a pinned address

Callers import the module they need (`from node.transfer.cache import ...`): the package root
imports nothing, so that a command loads only what it uses (libp2p, onnxruntime and matplotlib are slow
to import).
"""

from __future__ import annotations

__all__ = ["blob", "blob_fetch", "cache", "fetch", "urls"]
