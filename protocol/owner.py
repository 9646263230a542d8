"""Owner statements: a device owner's Ed25519 key vouching that a peer id is one of its devices.

One owner can run many devices, and a quorum of one owner's devices is one owner's word (BOINC keeps
one result per user per work unit for the same reason). An owner keeps one Ed25519 key (`sark-node
owner new FILE`); each of its workers advertises the owner's public key and the owner's signature over
`STATEMENT_PREFIX + peer id` (`sign_owner`). A submitter believes the owner only when that signature
verifies for the very peer id that signed the advert (`owner_of`): a statement copied from another
device names another peer id and is refused, and nobody can claim an owner without its private key.
A device that states no owner is its own owner (one device, one vote), which is what every device was
before owner keys. What a statement cannot prove: that an owner has only one key (a Sybil mints one
key per device and states none); owners count against collusion only among devices that declare
them, networks (`scheduler.verification.networks`) count against the rest.

Pure: no clock, no files; the node reads the key file and the submitter calls `owner_of`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import Field

from protocol.base import Value

STATEMENT_PREFIX: Final = b"sark-owner/v1:"
"""What an owner signs before a peer id: no other sark signature (`records`' start "sark-record:")
ever verifies as an owner statement, nor one as a record."""
OWNER_ID_PREFIX: Final = "owner-"
OWNER_ID_HEX: Final = 16
"""An owner id: `owner-` and the first 16 hex digits of the SHA-256 of its public key (64 bits)."""
SHORT_ID_HEX: Final = 8
"""How many of those digits a row shows (`short_owner`)."""


class OwnerStatement(Value):
    """An owner's word that the advertising peer is its device.

    Attributes:
        public_key: the owner's raw Ed25519 public key.
        signature: its signature over `STATEMENT_PREFIX + peer id` (UTF-8).
    """

    public_key: bytes = Field(min_length=32, max_length=32)
    signature: bytes = Field(min_length=64, max_length=64)


@dataclass(frozen=True)
class Owner:
    """Who owns a peer as the submitter believes it.

    Attributes:
        owner_id: the owner's id (`owner_id`) when the peer stated a valid one; "" when it stated none
            (its own owner) or an invalid one.
        refused: why a stated owner is not believed ("" when none was stated or it verifies).
    """

    owner_id: str = ""
    refused: str = ""


def owner_id(public_key: bytes) -> str:
    """The id people and campaigns name an owner by (`owner-` and 16 hex digits of its key's hash)."""
    return OWNER_ID_PREFIX + hashlib.sha256(public_key).hexdigest()[:OWNER_ID_HEX]


def short_owner(owner: str) -> str:
    """An owner id as a row shows it (`owner-` and 8 hex digits); any other text unchanged."""
    if owner.startswith(OWNER_ID_PREFIX):
        return owner[: len(OWNER_ID_PREFIX) + SHORT_ID_HEX]
    return owner


def owner_public_key(private_key: bytes) -> bytes:
    """The raw public key of an owner's raw 32-byte Ed25519 seed.

    Raises:
        ValueError: the seed is not 32 bytes.
    """
    key = Ed25519PrivateKey.from_private_bytes(private_key)
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def sign_owner(private_key: bytes, peer_id: str) -> OwnerStatement:
    """The owner's statement that `peer_id` is its device.

    Raises:
        ValueError: the owner's seed is not 32 bytes.
    """
    key = Ed25519PrivateKey.from_private_bytes(private_key)
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return OwnerStatement(public_key=public, signature=key.sign(STATEMENT_PREFIX + peer_id.encode()))


def owner_of(statement: OwnerStatement | None, peer_id: str) -> Owner:
    """Who owns `peer_id` by its advert's statement: its owner's id when the signature verifies for
    this peer id, none stated (its own owner), or refused with why (copied from another device or
    forged: the signature does not verify for this peer id)."""
    if statement is None:
        return Owner()
    try:
        key = Ed25519PublicKey.from_public_bytes(statement.public_key)
        key.verify(statement.signature, STATEMENT_PREFIX + peer_id.encode())
    except (ValueError, InvalidSignature):
        claimed = owner_id(statement.public_key)
        return Owner(
            refused=f"owner statement refused: {claimed}'s signature does not verify for this peer id "
            "(copied from another device, or forged)"
        )
    return Owner(owner_id(statement.public_key))


__all__ = [
    "OWNER_ID_PREFIX",
    "STATEMENT_PREFIX",
    "Owner",
    "OwnerStatement",
    "owner_id",
    "owner_of",
    "owner_public_key",
    "short_owner",
    "sign_owner",
]
