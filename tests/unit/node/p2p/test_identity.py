"""The node's identity: the peer id `sark-node id` derives (without importing `protocol`) is the one
`protocol.records` derives, binds envelopes to and reads keys back from."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.errors import ConfigError
from node.p2p.identity import SEED_BYTES, identity_peer_id, load_seed, peer_id_of_seed
from protocol.records import peer_id_from_public_key, public_key_from_peer_id, public_key_of


@given(st.binary(min_size=SEED_BYTES, max_size=SEED_BYTES))
def test_both_derivations_give_one_peer_id(seed: bytes) -> None:
    peer_id = peer_id_of_seed(seed)
    assert peer_id == peer_id_from_public_key(public_key_of(seed))
    assert public_key_from_peer_id(peer_id) == public_key_of(seed)
    assert peer_id.startswith("12D3KooW")


def test_the_identity_file_is_made_once_and_owner_only(tmp_path: Path) -> None:
    key_file = tmp_path / "node" / "identity.key"
    first = identity_peer_id(key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert identity_peer_id(key_file) == first == peer_id_of_seed(key_file.read_bytes())


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "identity.key"
    load_seed(key_file)
    key_file.chmod(0o644)
    with pytest.raises(ConfigError, match="0600"):
        load_seed(key_file)
