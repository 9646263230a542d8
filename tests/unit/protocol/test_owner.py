"""Owner statements: bound to the peer id they name, never believed when copied, forged or broken."""

from __future__ import annotations

import os

import pytest

from protocol import (
    DOMAIN_ADVERT,
    AdvertBody,
    DeviceProfile,
    Owner,
    OwnerStatement,
    open_envelope,
    owner_id,
    owner_of,
    peer_id_from_public_key,
    public_key_of,
    seal,
    short_owner,
    sign_owner,
)
from protocol.owner import STATEMENT_PREFIX


def _peer() -> tuple[bytes, str]:
    seed = os.urandom(32)
    return seed, peer_id_from_public_key(public_key_of(seed))


def test_a_statement_names_its_owner_for_the_peer_it_was_signed_for() -> None:
    owner_seed = os.urandom(32)
    _, peer = _peer()
    statement = sign_owner(owner_seed, peer)
    got = owner_of(statement, peer)
    assert got == Owner(owner_id(public_key_of(owner_seed)))
    assert got.owner_id.startswith("owner-")
    assert len(got.owner_id) == len("owner-") + 16
    assert short_owner(got.owner_id) == got.owner_id[: len("owner-") + 8]


def test_no_statement_is_its_own_owner() -> None:
    assert owner_of(None, _peer()[1]) == Owner()


def test_a_statement_copied_to_another_peer_is_refused() -> None:
    owner_seed = os.urandom(32)
    (_, first), (_, second) = _peer(), _peer()
    got = owner_of(sign_owner(owner_seed, first), second)
    assert got.owner_id == ""
    assert "does not verify for this peer id" in got.refused
    assert owner_id(public_key_of(owner_seed)) in got.refused  # names whose statement it copied


@pytest.mark.parametrize("case", ["other key", "flipped bit", "not a curve point", "another domain"])
def test_a_forged_statement_is_refused(case: str) -> None:
    owner_seed, (device_seed, peer) = os.urandom(32), _peer()
    good = sign_owner(owner_seed, peer)
    if case == "other key":  # someone's public key with the forger's own signature
        forged = good.with_(signature=sign_owner(os.urandom(32), peer).signature)
    elif case == "flipped bit":
        forged = good.with_(signature=bytes([good.signature[0] ^ 1]) + good.signature[1:])
    elif case == "not a curve point":
        forged = good.with_(public_key=b"\xff" * 32)
    else:  # the device's own advert signature is no owner statement
        envelope = seal(_advert(peer), DOMAIN_ADVERT, device_seed)
        forged = OwnerStatement(public_key=envelope.public_key, signature=envelope.signature)
    assert owner_of(forged, peer).refused.startswith("owner statement refused")
    assert owner_of(forged, peer).owner_id == ""


def test_the_statement_signs_the_prefix_and_the_peer_id_only() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    owner_seed, (_, peer) = os.urandom(32), _peer()
    statement = sign_owner(owner_seed, peer)
    key = Ed25519PublicKey.from_public_bytes(statement.public_key)
    key.verify(statement.signature, STATEMENT_PREFIX + peer.encode())  # raises if not


def _advert(peer: str, owner: OwnerStatement | None = None) -> AdvertBody:
    profile = DeviceProfile(
        device_name="box", soc="x86", cores_physical=2, cores_logical=2, ram_mb=8000, os="Linux",
        os_version="6", fingerprint="f",
    )  # fmt: skip
    return AdvertBody(peer_id=peer, seq=1, issued_at=0.0, expires_at=60.0, profile=profile, owner=owner)


def test_an_advert_carries_its_statement_through_its_envelope() -> None:
    owner_seed, (device_seed, peer) = os.urandom(32), _peer()
    body = _advert(peer, sign_owner(owner_seed, peer))
    opened = open_envelope(seal(body, DOMAIN_ADVERT, device_seed), DOMAIN_ADVERT, AdvertBody, now=1.0)
    assert owner_of(opened.owner, opened.peer_id).owner_id == owner_id(public_key_of(owner_seed))
