"""Errors of the protocol package: who broke the protocol, us or the peer."""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every error raised by `protocol`.

    Attributes:
        detail: what went wrong, for people and logs; never branched on.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class LocalProtocolError(ProtocolError):
    """We tried to send something the protocol does not allow at this point."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes or a message that the protocol does not allow.

    Any undecodable, oversized, invalid or out-of-order input ends up here and nowhere else.
    """


class RecordError(ProtocolError):
    """A signed record failed verification (bad signature, wrong signer, expired, wrong domain)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
