"""A worker that copies another device's owner statement: the real `sark-node join`, patched in memory.

Run as `python tests/kit/ownerforger.py PUBLIC_KEY_HEX SIGNATURE_HEX join ...`. It is the node's own
worker with its own key, speaking the real protocol; the only change: the owner statement its advert
carries is the one given (another device's, copied byte for byte: that device's owner's public key
and signature over *that* device's peer id), in place of the statement its own owner key would sign.
It holds no owner key. A submitter must refuse the statement (it does not verify for this peer id)
and never place this worker (`protocol.owner.owner_of`, `scheduler.state.placement`).

Nothing in the product reads this file.
"""

from __future__ import annotations

import sys

from protocol import OwnerStatement


def _copied(public_key: bytes, signature: bytes) -> None:
    """Every advert of this worker carries the copied statement."""
    import node.worker.role

    statement = OwnerStatement(public_key=public_key, signature=signature)

    def owner_statement(seed: bytes | None, peer_id: str) -> OwnerStatement:
        return statement

    node.worker.role.owner_statement = owner_statement  # type: ignore[attr-defined]


if __name__ == "__main__":
    _copied(bytes.fromhex(sys.argv.pop(1)), bytes.fromhex(sys.argv.pop(1)))
    from node.cli import main

    main()
