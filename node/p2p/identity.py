"""A node's persistent Ed25519 identity: a 32-byte seed in a file only its owner can read (T17)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from node.errors import ConfigError
from protocol.records import peer_id_from_public_key, public_key_of

SEED_BYTES = 32


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


def identity_peer_id(key_file: Path) -> str:
    """The peer id of the node whose identity lives in `key_file` (created if missing)."""
    return peer_id_from_public_key(public_key_of(load_seed(key_file)))
