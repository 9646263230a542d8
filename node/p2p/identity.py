"""A node's persistent Ed25519 identity: a 32-byte seed in a file only its owner can read (T17),
and the peer id it gives.

The peer id is derived here a second time, beside `protocol.records.peer_id_from_public_key`, on
purpose: `sark-node id` must start at once, and importing anything of `protocol` runs its package
root, which builds every pydantic model; `protocol` may import nothing of ours, so the one
derivation cannot live below both. The derivation is a fixed byte prefix and base58btc, and
tests/unit/node/p2p/test_identity.py pins that both give the same id for random keys.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from node.errors import ConfigError

SEED_BYTES: Final = 32
_PEER_ID_PREFIX: Final = b"\x00\x24\x08\x01\x12\x20"
"""identity multihash (0x00), length 36, protobuf PublicKey{Type: Ed25519 (1), Data: 32 bytes}."""
_BASE58: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def load_seed(key_file: Path | None) -> bytes:
    """The identity's seed: read from `key_file`, created there (mode 0600) if missing, or a
    throwaway one when `key_file` is None.

    Raises:
        ConfigError: the file is readable by others, unreadable, or not a 32-byte seed.
    """
    if key_file is None:
        return os.urandom(SEED_BYTES)
    if key_file.exists():
        mode = stat.S_IMODE(key_file.stat().st_mode)
        if mode & 0o077:
            raise ConfigError("key file", f"{key_file} has mode {mode:04o}; it must be 0600 (chmod 600)")
        try:
            seed = key_file.read_bytes()
        except OSError as exc:
            raise ConfigError("key file", f"cannot read {key_file}: {exc}") from exc
        if len(seed) != SEED_BYTES:
            raise ConfigError("key file", f"{key_file} is not a 32-byte Ed25519 seed")
        return seed
    seed = os.urandom(SEED_BYTES)
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(seed)
    return seed


def peer_id_of_seed(seed: bytes) -> str:
    """The libp2p peer id (`12D3KooW...`) of the Ed25519 key with this 32-byte seed: the base58btc
    identity multihash of its public key, as `protocol.records.peer_id_from_public_key` writes it."""
    public = (
        Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    data = _PEER_ID_PREFIX + public
    number = int.from_bytes(data, "big")
    digits = []
    while number:
        number, rest = divmod(number, 58)
        digits.append(_BASE58[rest])
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + "".join(reversed(digits))


def identity_peer_id(key_file: Path) -> str:
    """The peer id of the node whose identity lives in `key_file` (created if missing)."""
    return peer_id_of_seed(load_seed(key_file))
