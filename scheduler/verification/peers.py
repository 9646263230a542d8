"""What verification reads of a peer: its id, the host it was reached at, its advertised profile, its owner.

The scheduler's `PeerView` (`scheduler.state.placement`) is one. Verification names these facts
as a Protocol, so that it builds on nothing of the state machine (`tests/unit/repository/test_imports.py`).
"""

from __future__ import annotations

from typing import Protocol

from protocol import DeviceProfile, Owner


class Advertised(Protocol):
    """A peer as a judgement reads it."""

    @property
    def peer_id(self) -> str:
        """The libp2p peer id."""
        ...

    @property
    def host(self) -> str:
        """The IP address the submitter's connection to it came from ("" unknown)."""
        ...

    @property
    def profile(self) -> DeviceProfile:
        """The device profile from its verified advert."""
        ...

    @property
    def owner(self) -> Owner:
        """Its owner, from its advert's statement as the submitter checked it (`protocol.owner_of`)."""
        ...


__all__ = ["Advertised"]
