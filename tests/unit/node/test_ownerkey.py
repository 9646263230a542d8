"""The owner key file: minted once (0600, never overwritten), read back, refused when unsafe."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.errors import ConfigError
from node.ownerkey import mint_owner_key, owner_id_of, owner_statement, read_owner_key
from protocol import owner_of


def test_a_minted_key_is_private_read_back_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "owner.key"
    minted = mint_owner_key(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert owner_id_of(path) == minted
    with pytest.raises(ConfigError, match="never overwritten"):
        mint_owner_key(path)
    assert owner_id_of(path) == minted


def test_its_statement_names_the_owner_for_the_peer_it_signs_for(tmp_path: Path) -> None:
    path = tmp_path / "owner.key"
    minted = mint_owner_key(path)
    peer = "12D3KooWQmLz6ZyDxdsYfXNxsNVTAb9Q9PBC2uMtqpUMPWbMqcPn"
    assert owner_of(owner_statement(read_owner_key(path), peer), peer).owner_id == minted
    assert owner_statement(None, peer) is None


@pytest.mark.parametrize(
    ("content", "mode", "why"),
    [(b"x" * 32, 0o644, "must be 0600"), (b"short", 0o600, "not an owner key"), (None, 0o600, "cannot read")],
)
def test_an_unsafe_or_broken_key_is_refused(
    tmp_path: Path, content: bytes | None, mode: int, why: str
) -> None:
    path = tmp_path / "owner.key"
    if content is not None:
        path.write_bytes(content)
        path.chmod(mode)
    with pytest.raises(ConfigError, match=why):
        read_owner_key(path)


def test_the_submitters_view_of_an_advert_believes_its_own_statement_and_refuses_a_copy(
    tmp_path: Path,
) -> None:
    from node.submitter.discovery import _view
    from protocol import AdvertBody, DeviceProfile, Load, peer_id_from_public_key, public_key_of

    path = tmp_path / "owner.key"
    minted = mint_owner_key(path)
    first, second = (peer_id_from_public_key(public_key_of(bytes([k]) * 32)) for k in (1, 2))
    profile = DeviceProfile(
        device_name="box", soc="x86", cores_physical=2, cores_logical=2, ram_mb=8000, os="Linux",
        os_version="6", fingerprint="f",
    )  # fmt: skip
    statement = owner_statement(read_owner_key(path), first)

    def advert(peer: str) -> AdvertBody:
        return AdvertBody(
            peer_id=peer, seq=1, issued_at=0.0, expires_at=9e9, profile=profile, owner=statement
        )

    assert _view(advert(first), Load()).owner.owner_id == minted
    copied = _view(advert(second), Load()).owner  # the first device's statement in another's advert
    assert copied.owner_id == ""
    assert copied.refused.startswith("owner statement refused")
