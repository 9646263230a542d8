"""An owner key: the Ed25519 seed a device owner keeps in a file, and the statement it signs per device.

One owner, one vote (`protocol.owner`): each worker started with `join --owner-key FILE` (or the
`owner_key` setting) advertises its owner's statement that its peer id is the owner's device, so a
submitter counts all of one owner's devices as one in a quorum. The file is a 32-byte seed, mode 0600,
as the node's own identity is (`node.p2p.identity`); `sark-node owner new FILE` mints one. The same
file on every device of the owner: the key never leaves them, only statements do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from node.errors import ConfigError
from protocol import OwnerStatement, owner_id, owner_public_key, sign_owner

SEED_BYTES: Final = 32
_FIELD: Final = "owner key"


def mint_owner_key(path: Path) -> str:
    """A new owner key written to `path` (mode 0600, never over an existing file); its owner id.

    Raises:
        ConfigError: the file exists or cannot be written.
    """
    seed = os.urandom(SEED_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise ConfigError(_FIELD, f"{path} exists: an owner key is never overwritten") from exc
    except OSError as exc:
        raise ConfigError(_FIELD, f"cannot write {path}: {exc}") from exc
    with os.fdopen(fd, "wb") as out:
        out.write(seed)
    return owner_id(owner_public_key(seed))


def read_owner_key(path: Path) -> bytes:
    """The owner's seed in `path`.

    Raises:
        ConfigError: missing, readable by others, unreadable, or not a 32-byte seed.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ConfigError(_FIELD, f"{path} has mode {mode:04o}; it must be 0600 (chmod 600)")
        seed = path.read_bytes()
    except OSError as exc:
        raise ConfigError(_FIELD, f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(seed) != SEED_BYTES:
        raise ConfigError(_FIELD, f"{path} is not an owner key (a 32-byte Ed25519 seed)")
    return seed


def owner_id_of(path: Path) -> str:
    """The owner id of the key in `path` (what `verify: {reference: [...]}` and rows name).

    Raises:
        ConfigError: as `read_owner_key`.
    """
    return owner_id(owner_public_key(read_owner_key(path)))


def owner_statement(seed: bytes | None, peer_id: str) -> OwnerStatement | None:
    """The owner's statement that `peer_id` is its device (None without an owner key: its own owner)."""
    return None if seed is None else sign_owner(seed, peer_id)


__all__ = ["mint_owner_key", "owner_id_of", "owner_statement", "read_owner_key"]
