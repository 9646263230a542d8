"""node.dht: the advert validator (T4) and the kad patches (P7, P12), on put and on get."""

from __future__ import annotations

import pytest
from kit.data import make_profile
from libp2p.crypto.ed25519 import create_new_key_pair

from node.p2p.dht import ADVERT_MAX_BYTES, advert_key, check_advert, select_advert
from node.p2p.kadpatch import kad_protocol_ids, patch_kad
from protocol import (
    DOMAIN_ADVERT,
    MAX_ADVERT_ADDRS,
    MAX_ADVERT_CIRCUITS,
    AdvertBody,
    Load,
    Reachability,
    RecordError,
)
from protocol.codec import pack_body
from protocol.records import peer_id_from_public_key, public_key_of, seal

NOW = 1_800_000_000.0


def _key() -> tuple[bytes, str]:
    seed = create_new_key_pair().private_key.to_bytes()
    return seed, peer_id_from_public_key(public_key_of(seed))


def _advert(seed: bytes, peer: str, *, seq: int = 1, expires: float = NOW + 60, name: str = "d") -> bytes:
    profile = make_profile().with_(device_name=name)  # `with_` does not validate: a patched worker's name
    body = AdvertBody(peer_id=peer, seq=seq, issued_at=NOW - 1, expires_at=expires, profile=profile)
    return pack_body(seal(body, DOMAIN_ADVERT, seed))


def test_key_is_at_most_50_bytes() -> None:
    _, peer = _key()
    assert len(advert_key(peer).encode()) == 46


def test_valid_advert_passes() -> None:
    seed, peer = _key()
    _, body = check_advert(advert_key(peer), _advert(seed, peer), NOW)
    assert body.peer_id == peer


def test_advert_signed_by_another_key_is_rejected() -> None:
    _seed, peer = _key()
    other_seed, _ = _key()
    with pytest.raises(RecordError):
        check_advert(advert_key(peer), _advert(other_seed, peer), NOW)


def test_advert_under_someone_elses_key_is_rejected() -> None:
    seed, peer = _key()
    _, victim = _key()
    with pytest.raises(RecordError):
        check_advert(advert_key(victim), _advert(seed, peer), NOW)


def test_expired_advert_is_rejected() -> None:
    seed, peer = _key()
    with pytest.raises(RecordError):
        check_advert(advert_key(peer), _advert(seed, peer, expires=NOW - 60), NOW)


def test_oversized_advert_is_rejected() -> None:
    seed, peer = _key()
    with pytest.raises(RecordError, match="size"):
        check_advert(advert_key(peer), _advert(seed, peer, name="x" * ADVERT_MAX_BYTES), NOW)


@pytest.mark.parametrize("name", ["\x1b[2J", "pixel\x07", "a\x9b31m", "x" * 129])
def test_advert_with_a_control_character_or_a_long_name_is_invalid(name: str) -> None:
    seed, peer = _key()
    with pytest.raises(RecordError, match="device_name"):
        check_advert(advert_key(peer), _advert(seed, peer, name=name), NOW)
    assert select_advert(advert_key(peer), [_advert(seed, peer, name=name), _advert(seed, peer)], NOW) == 1


@pytest.mark.parametrize(
    ("addrs", "circuits"),
    [
        (tuple(f"/ip4/127.0.0.1/tcp/{p}" for p in range(1, MAX_ADVERT_ADDRS + 2)), ()),
        (
            (),
            tuple(f"/ip4/127.0.0.1/tcp/1/p2p/R/p2p-circuit/p2p/{p}" for p in range(MAX_ADVERT_CIRCUITS + 1)),
        ),
        (("/ip4/127.0.0.1/tcp/1\nx",), ()),
        (("/ip4/127.0.0.1/tcp/" + "1" * 300,), ()),
    ],
    ids=["too-many", "too-many-circuits", "control-character", "too-long"],
)
def test_advert_with_too_many_or_odd_addresses_is_invalid(
    addrs: tuple[str, ...], circuits: tuple[str, ...]
) -> None:
    """Issue 30: an advert's addresses are the peer's claim; a list of other services' is refused."""
    seed, peer = _key()
    profile = make_profile()
    body = AdvertBody.model_construct(  # as a hostile worker's own code would build it
        peer_id=peer, seq=1, issued_at=NOW - 1, expires_at=NOW + 60, addrs=addrs, circuit_addrs=circuits,
        reachability=Reachability.UNKNOWN, profile=profile, load=Load(),
    )  # fmt: skip
    with pytest.raises(RecordError, match="addrs"):
        check_advert(advert_key(peer), pack_body(seal(body, DOMAIN_ADVERT, seed)), NOW)


def test_select_keeps_the_highest_valid_seq() -> None:
    seed, peer = _key()
    other_seed, _ = _key()
    key = advert_key(peer)
    low, high = _advert(seed, peer, seq=1), _advert(seed, peer, seq=2)
    forged = _advert(other_seed, peer, seq=99)
    assert select_advert(key, [high, low], NOW) == 0
    assert select_advert(key, [low, high], NOW) == 1
    assert select_advert(key, [low, forged], NOW) == 0


def test_kad_runs_on_the_private_protocol_id() -> None:
    patch_kad(300)
    assert set(kad_protocol_ids().values()) == {"/sark/kad/1.0.0"}
