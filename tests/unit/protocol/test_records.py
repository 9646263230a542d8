"""Signed records: peer ids, seal/open, every rejection reason, and the replay guard."""

from __future__ import annotations

import hashlib
import math

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from protocol import (
    DOMAIN_ADVERT,
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    DOMAIN_RELEASE,
    DOMAIN_RESULT,
    AdvertBody,
    CancelBody,
    ComputeUnit,
    DeviceProfile,
    Envelope,
    Measurement,
    ModelRef,
    NonceCache,
    OfferBody,
    RecordError,
    ReleaseBody,
    ResultBody,
    Stats,
    TaskSpec,
    Value,
    open_envelope,
    pack_body,
    peer_id_from_public_key,
    public_key_from_peer_id,
    public_key_of,
    seal,
)

NOW = 1_800_000_000.0


def _seed(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest()


ALICE, BOB = _seed("alice"), _seed("bob")
ALICE_ID = peer_id_from_public_key(public_key_of(ALICE))
BOB_ID = peer_id_from_public_key(public_key_of(BOB))
PROFILE = DeviceProfile(
    device_name="box", soc="x86", cores_physical=2, cores_logical=2, ram_mb=24_000, os="Linux",
    os_version="6", fingerprint="f",
)  # fmt: skip
STATS = Stats(n=1, min=1, max=1, mean=1, median=1, stddev=0, p90=1, p95=1, p99=1, cv=0)


def offer(submitter: str = ALICE_ID, issued_at: float = NOW, expires_at: float = NOW + 300) -> OfferBody:
    return OfferBody(
        campaign_id="c-1", task_id="t-1", submitter=submitter, recipient=BOB_ID, nonce=b"n" * 16,
        issued_at=issued_at, expires_at=expires_at, spec=TaskSpec(compute_unit=ComputeUnit.CPU_ONNX),
        model=ModelRef(name="m.onnx", size=10, sha256="0" * 64),
    )  # fmt: skip


def result(worker: str = BOB_ID) -> ResultBody:
    measurement = Measurement(
        compute_unit=ComputeUnit.CPU_ONNX, load_ms=STATS, load_first_ms=1, first_inference_ms=1,
        warmups_used=1, inference_ms=STATS, peak_load_ram_mb=1, peak_inference_ram_mb=1, cpu_cores_used=1,
    )  # fmt: skip
    return ResultBody(
        campaign_id="c-1", task_id="t-1", lease_id="l-1", worker=worker, submitter=ALICE_ID,
        model_sha256="0" * 64, device=PROFILE, measurement=measurement, finished_at=NOW,
    )  # fmt: skip


def advert(peer_id: str = BOB_ID) -> AdvertBody:
    return AdvertBody(peer_id=peer_id, seq=1, issued_at=NOW, expires_at=NOW + 3600, profile=PROFILE)


def cancel() -> CancelBody:
    return CancelBody(task_id="t-1", recipient=BOB_ID, nonce=b"c" * 16, issued_at=NOW, expires_at=NOW + 60)


def reason_of(envelope: Envelope, domain: str, cls: type[object], **kwargs: object) -> str:
    with pytest.raises(RecordError) as info:
        open_envelope(envelope, domain, cls, **({"now": NOW} | kwargs))  # type: ignore[arg-type,type-var]
    return info.value.reason


def test_peer_id_is_the_libp2p_ed25519_identity_id() -> None:
    from libp2p.crypto.ed25519 import Ed25519PublicKey as Libp2pKey
    from libp2p.peer.id import ID

    public_key = public_key_of(ALICE)
    assert ALICE_ID.startswith("12D3KooW")
    assert ID.from_pubkey(Libp2pKey.from_bytes(public_key)).to_base58() == ALICE_ID
    assert public_key_from_peer_id(ALICE_ID) == public_key


def test_public_key_of_matches_cryptography() -> None:
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    assert public_key_of(seed) == key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


@pytest.mark.parametrize(
    "peer_id",
    [
        "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N",  # an RSA key's sha256 multihash id
        "16Uiu2HAmLhLvBoYaoZfaMUKuibM6ac163GwKY74c5kiSLg5KvLpY",  # secp256k1
        "",
        "0OIl",
        "12D3KooW" + "x" * 200,
        ALICE_ID[:-1],
    ],
)
def test_a_peer_id_that_embeds_no_ed25519_key_is_a_bad_key(peer_id: str) -> None:
    with pytest.raises(RecordError) as info:
        public_key_from_peer_id(peer_id)
    assert info.value.reason == "bad_key"


def test_a_private_key_must_be_a_32_byte_seed() -> None:
    with pytest.raises(RecordError):
        public_key_of(b"short")


@pytest.mark.parametrize(
    ("body", "domain", "signer"),
    [(offer(), DOMAIN_OFFER, ALICE), (cancel(), DOMAIN_CANCEL, ALICE), (result(), DOMAIN_RESULT, BOB),
     (advert(), DOMAIN_ADVERT, BOB)],
    ids=["offer", "cancel", "result", "advert"],
)  # fmt: skip
def test_seal_then_open(body: OfferBody, domain: str, signer: bytes) -> None:
    envelope = seal(body, domain, signer)
    assert envelope.payload == pack_body(body)
    signer_id = peer_id_from_public_key(public_key_of(signer))
    assert open_envelope(envelope, domain, type(body), now=NOW, signer=signer_id) == body


def test_a_signature_by_one_key_claiming_another_peer_id_is_rejected() -> None:
    real = seal(offer(submitter=BOB_ID), DOMAIN_OFFER, ALICE)
    assert reason_of(real, DOMAIN_OFFER, OfferBody) == "signer_mismatch"  # body names Bob, Alice signed
    claimed = real.with_(peer_id=BOB_ID)
    assert reason_of(claimed, DOMAIN_OFFER, OfferBody) == "bad_key"  # Alice's key is not Bob's id
    swapped = real.with_(peer_id=BOB_ID, public_key=public_key_of(BOB))
    assert reason_of(swapped, DOMAIN_OFFER, OfferBody) == "bad_signature"  # Bob's key, Alice's signature
    honest = seal(offer(), DOMAIN_OFFER, ALICE)
    assert reason_of(honest, DOMAIN_OFFER, OfferBody, signer=BOB_ID) == "signer_mismatch"


RELEASE = ReleaseBody(
    campaign_id="c-1", task_id="t-1", lease_id="L1", worker=ALICE_ID, submitter=BOB_ID, issued_at=NOW
)


@pytest.mark.parametrize(
    ("body", "cls", "domain"),
    [
        (result(worker=ALICE_ID), ResultBody, DOMAIN_RESULT),
        (advert(peer_id=ALICE_ID), AdvertBody, DOMAIN_ADVERT),
        (RELEASE, ReleaseBody, DOMAIN_RELEASE),
    ],
)
def test_results_releases_and_adverts_must_be_signed_by_the_peer_they_name(
    body: Value, cls: type[Value], domain: str
) -> None:
    assert reason_of(seal(body, domain, BOB), domain, cls) == "signer_mismatch"
    assert open_envelope(seal(body, domain, ALICE), domain, cls, now=NOW) == body


def test_a_release_signature_is_no_result_signature() -> None:
    envelope = seal(RELEASE, DOMAIN_RELEASE, ALICE)
    assert reason_of(envelope, DOMAIN_RESULT, ReleaseBody) == "wrong_domain"


def test_every_single_changed_byte_is_rejected() -> None:
    envelope = seal(offer(), DOMAIN_OFFER, ALICE)
    rejected = 0
    for field in ("payload", "signature", "public_key"):
        value: bytes = getattr(envelope, field)
        for i in range(len(value)):
            changed = value[:i] + bytes([value[i] ^ 0x01]) + value[i + 1 :]
            assert reason_of(envelope.with_(**{field: changed}), DOMAIN_OFFER, OfferBody) in {
                "bad_signature",
                "bad_key",
            }
            rejected += 1
    assert rejected == len(envelope.payload) + 64 + 32


def test_expiry_and_issue_time_with_skew() -> None:
    envelope = seal(offer(expires_at=NOW + 300), DOMAIN_OFFER, ALICE)
    assert open_envelope(envelope, DOMAIN_OFFER, OfferBody, now=NOW + 325)  # within 30 s skew
    assert reason_of(envelope, DOMAIN_OFFER, OfferBody, now=NOW + 331) == "expired"
    future = seal(offer(issued_at=NOW + 25, expires_at=NOW + 300), DOMAIN_OFFER, ALICE)
    assert open_envelope(future, DOMAIN_OFFER, OfferBody, now=NOW)
    too_early = seal(offer(issued_at=NOW + 60, expires_at=NOW + 300), DOMAIN_OFFER, ALICE)
    assert reason_of(too_early, DOMAIN_OFFER, OfferBody) == "not_yet_valid"
    nan = seal(offer(expires_at=math.nan), DOMAIN_OFFER, ALICE)
    assert reason_of(nan, DOMAIN_OFFER, OfferBody) == "expired"


def test_a_record_signed_under_another_domain_is_rejected() -> None:
    envelope = seal(offer(), DOMAIN_RESULT, ALICE)
    assert reason_of(envelope, DOMAIN_OFFER, OfferBody) == "wrong_domain"
    private = seal(offer(), "someone/else/v1", ALICE)
    assert reason_of(private, DOMAIN_OFFER, OfferBody) == "bad_signature"


def test_a_record_for_another_recipient_is_rejected_when_we_say_who_we_are() -> None:
    envelope = seal(offer(), DOMAIN_OFFER, ALICE)
    assert open_envelope(envelope, DOMAIN_OFFER, OfferBody, now=NOW, recipient=BOB_ID)
    assert reason_of(envelope, DOMAIN_OFFER, OfferBody, recipient=ALICE_ID) == "wrong_recipient"
    assert open_envelope(
        seal(advert(), DOMAIN_ADVERT, BOB), DOMAIN_ADVERT, AdvertBody, now=NOW, recipient=ALICE_ID
    )


def test_a_payload_of_the_wrong_type_is_malformed() -> None:
    envelope = seal(advert(peer_id=ALICE_ID), DOMAIN_OFFER, ALICE)
    assert reason_of(envelope, DOMAIN_OFFER, OfferBody) == "malformed"


def test_domains_cannot_be_confused_by_moving_bytes_between_domain_and_payload() -> None:
    envelope = seal(offer(), "sark/offer/v", ALICE)
    moved = envelope.with_(payload=b"1" + envelope.payload)
    assert reason_of(moved, DOMAIN_OFFER, OfferBody) == "bad_signature"


def test_a_replayed_nonce_is_refused_until_it_expires() -> None:
    cache = NonceCache(capacity=10)
    assert cache.check_and_add(ALICE_ID, b"n" * 16, expires_at=NOW + 60, now=NOW)
    assert not cache.check_and_add(ALICE_ID, b"n" * 16, expires_at=NOW + 60, now=NOW + 1)
    assert cache.check_and_add(BOB_ID, b"n" * 16, expires_at=NOW + 60, now=NOW + 1)
    assert not cache.check_and_add(ALICE_ID, b"n" * 16, expires_at=NOW + 60, now=NOW + 89)  # skew still open
    assert len(cache) == 2
    assert not cache.check_and_add(ALICE_ID, b"n" * 16, expires_at=NOW + 60, now=NOW + 91)  # expired anyway
    assert len(cache) == 0


def test_a_full_nonce_cache_fails_closed_and_frees_room_as_entries_expire() -> None:
    cache = NonceCache(capacity=3, share=3, skew_s=0.0)
    for i in range(3):
        assert cache.check_and_add(ALICE_ID, bytes([i]) * 16, expires_at=NOW + 10 + i, now=NOW)
    assert not cache.check_and_add(ALICE_ID, b"x" * 16, expires_at=NOW + 100, now=NOW)
    assert cache.check_and_add(ALICE_ID, b"x" * 16, expires_at=NOW + 100, now=NOW + 10.5)
    assert len(cache) == 3


@pytest.mark.parametrize(
    ("expires_at", "reason"),
    [
        (NOW + 365 * 86_400, "lifetime"),  # a year
        (1e12, "lifetime"),  # the year 33658
        (float("inf"), "lifetime"),
        (float("nan"), "expired"),  # NaN fails the expiry check first: never accepted either way
    ],
)
def test_an_offer_valid_for_longer_than_the_maximum_is_refused(expires_at: float, reason: str) -> None:
    envelope = seal(offer(expires_at=expires_at), DOMAIN_OFFER, ALICE)
    assert reason_of(envelope, DOMAIN_OFFER, OfferBody, max_lifetime_s=600.0) == reason


def test_an_offer_within_the_maximum_lifetime_opens() -> None:
    envelope = seal(offer(expires_at=NOW + 600), DOMAIN_OFFER, ALICE)
    assert (
        open_envelope(envelope, DOMAIN_OFFER, OfferBody, now=NOW, max_lifetime_s=600.0).expires_at
        == NOW + 600
    )


def test_one_signer_fills_only_its_own_share_of_the_nonce_cache() -> None:
    cache = NonceCache(capacity=10, share=4, skew_s=0.0)
    for i in range(4):
        assert cache.check_and_add(ALICE_ID, bytes([i]) * 16, expires_at=NOW + 600, now=NOW)
    assert not cache.has_room(ALICE_ID, NOW)
    assert not cache.check_and_add(ALICE_ID, b"x" * 16, expires_at=NOW + 600, now=NOW)  # its share is full
    assert cache.held_by(ALICE_ID) == 4
    assert cache.has_room(BOB_ID, NOW)
    assert cache.check_and_add(BOB_ID, b"x" * 16, expires_at=NOW + 600, now=NOW)  # another signer: room
    assert len(cache) == 5
    assert cache.check_and_add(ALICE_ID, b"x" * 16, expires_at=NOW + 700, now=NOW + 601)  # its own expired
    assert len(cache) == 1
