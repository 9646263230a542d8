"""Secret draws: every choice a worker could exploit, drawn from a key only the submitter holds.

A worker sees its offers (campaign id, task id, its own peer id), its samples, its profile and its
addresses, and may hold several keys. A draw derived from any of these (a campaign's id hashed, as
the spot checks once were) is a draw the worker computes too: it lies only where it predicts "not
checked". So each campaign gets 32 random bytes when it is created (the node makes them with
`secrets.token_bytes`, this package has no randomness), kept in the submitter's store with the
campaign and never sent; a draw is a keyed hash (`hashlib.blake2b(key=secret)`) of what is drawn
for (`Purpose`) and its subject (a task id, a task and a peer). Without the key, a worker's best
guess of any draw is the probability it was drawn with. A resumed campaign holds the same key, so
it decides the same way.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from typing import Final

SECRET_BYTES: Final = 32
"""The key's length: blake2b's largest key, and more than any worker can search."""


class Purpose(enum.StrEnum):
    """What a draw decides: each purpose draws apart, so one decision tells nothing of another."""

    SPOT_CHECK = "spot_check"
    """Whether a task placed on a trusted peer gets a second replica."""
    REPLICA_PEER = "replica_peer"
    """Which peer of the class runs a group's next replica (an order over the candidates)."""
    CHALLENGE_SEED = "challenge_seed"
    """A challenge round's matrices (`challenge`): sent only when the round starts."""
    CHALLENGE_ROWS = "challenge_rows"
    """Which rows of a challenge's product are checked: named only after the commitment arrived."""


@dataclass(frozen=True)
class DrawKey:
    """A campaign's secret: `SECRET_BYTES` random bytes (never printed, never sent).

    Attributes:
        secret: the key itself, as the submitter's store keeps it.
    """

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) != SECRET_BYTES:
            raise ValueError(f"a draw key is {SECRET_BYTES} bytes, got {len(self.secret)}")

    def __repr__(self) -> str:
        return "DrawKey(<secret>)"

    def draw(self, purpose: Purpose, subject: str) -> float:
        """A uniform draw in [0, 1) fixed by the key, the purpose and the subject."""
        message = f"{purpose.value}\x00{subject}".encode()
        digest = hashlib.blake2b(message, key=self.secret, digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64
