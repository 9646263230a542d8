"""Signed records: Ed25519 envelopes bound to libp2p peer ids, and a replay guard.

A libp2p peer id of an Ed25519 key is the base58btc identity multihash of the protobuf
`PublicKey{Type=Ed25519, Data=key}`, so the id embeds the key: whoever holds an envelope can check that
the key that signed it is the key the claimed peer id names, with no lookup and no libp2p import.

Signatures cover `b"sark-record:" + varint(len(domain)) + domain + payload`: a signature made under one
domain (an offer) never verifies under another (a result).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Final, TypeVar, final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from protocol.base import Value
from protocol.codec import pack_body, unpack_body
from protocol.errors import RecordError, RemoteProtocolError
from protocol.framing import encode_varint
from protocol.messages import (
    DOMAIN_ADVERT,
    DOMAIN_BUNDLE,
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    DOMAIN_RELEASE,
    DOMAIN_RESULT,
    AdvertBody,
    BundleSeal,
    Envelope,
    OfferBody,
    ReleaseBody,
    ResultBody,
)

T = TypeVar("T", bound=Value)

_PEER_ID_PREFIX: Final = b"\x00\x24\x08\x01\x12\x20"
"""identity multihash (0x00), length 36, protobuf PublicKey{Type: Ed25519 (1), Data: 32 bytes}."""
_SIGNING_PREFIX: Final = b"sark-record:"
_ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX: Final = {c: i for i, c in enumerate(_ALPHABET)}
_KNOWN_DOMAINS: Final = (
    DOMAIN_OFFER, DOMAIN_CANCEL, DOMAIN_RESULT, DOMAIN_RELEASE, DOMAIN_ADVERT, DOMAIN_BUNDLE
)  # fmt: skip
_SIGNER_FIELD: Final[Mapping[type[Value], str]] = {
    AdvertBody: "peer_id",
    ResultBody: "worker",
    ReleaseBody: "worker",
    OfferBody: "submitter",
    BundleSeal: "submitter",
}
"""The body field that names who signed it, per body type."""


def _b58encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    digits = []
    while number:
        number, rest = divmod(number, 58)
        digits.append(_ALPHABET[rest])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def _b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        if char not in _INDEX:
            raise ValueError(f"not base58: {char!r}")
        number = number * 58 + _INDEX[char]
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + number.to_bytes((number.bit_length() + 7) // 8, "big")


def peer_id_from_public_key(public_key: bytes) -> str:
    """The libp2p peer id of a raw 32-byte Ed25519 public key (it starts with `12D3KooW`).

    Args:
        public_key: the raw public key.

    Returns:
        The base58btc peer id.

    Raises:
        RecordError: ("bad_key") the key is not 32 bytes.
    """
    if len(public_key) != 32:
        raise RecordError("bad_key", f"an Ed25519 public key has 32 bytes, not {len(public_key)}")
    return _b58encode(_PEER_ID_PREFIX + public_key)


def public_key_from_peer_id(peer_id: str) -> bytes:
    """The raw Ed25519 public key embedded in a libp2p peer id.

    Args:
        peer_id: a base58btc peer id.

    Returns:
        The 32-byte public key.

    Raises:
        RecordError: ("bad_key") the id is not an Ed25519 identity-multihash peer id.
    """
    if len(peer_id) > 128:
        raise RecordError("bad_key", "peer id too long")
    try:
        raw = _b58decode(peer_id)
    except ValueError as exc:
        raise RecordError("bad_key", str(exc)) from exc
    if len(raw) != len(_PEER_ID_PREFIX) + 32 or not raw.startswith(_PEER_ID_PREFIX):
        raise RecordError("bad_key", f"{peer_id!r} is not an Ed25519 identity peer id")
    return raw[len(_PEER_ID_PREFIX) :]


def public_key_of(private_key: bytes) -> bytes:
    """The raw public key of a raw 32-byte Ed25519 private key (seed).

    Raises:
        RecordError: ("bad_key") the private key is not 32 bytes.
    """
    return _private(private_key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _private(private_key: bytes) -> Ed25519PrivateKey:
    try:
        return Ed25519PrivateKey.from_private_bytes(private_key)
    except ValueError as exc:
        raise RecordError("bad_key", "an Ed25519 private key is a 32-byte seed") from exc


def _signed_bytes(domain: str, payload: bytes) -> bytes:
    tag = domain.encode()
    return _SIGNING_PREFIX + encode_varint(len(tag)) + tag + payload


def seal(body: Value, domain: str, private_key: bytes) -> Envelope:
    """Sign a body under a domain.

    Args:
        body: the value to sign (OfferBody, CancelBody, ResultBody, AdvertBody...).
        domain: what the signature is for (`DOMAIN_OFFER`...); it never verifies for another.
        private_key: the signer's raw 32-byte Ed25519 seed.

    Returns:
        The envelope: the signer's peer id and public key, the canonical payload and the signature.
    """
    key = _private(private_key)
    public_key = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    payload = pack_body(body)
    return Envelope(
        peer_id=peer_id_from_public_key(public_key),
        public_key=public_key,
        payload=payload,
        signature=key.sign(_signed_bytes(domain, payload)),
    )


def _verifies(public_key: Ed25519PublicKey, envelope: Envelope, domain: str) -> bool:
    try:
        public_key.verify(envelope.signature, _signed_bytes(domain, envelope.payload))
    except InvalidSignature:
        return False
    return True


def _check_signature(envelope: Envelope, domain: str) -> None:
    """The envelope's key hashes to its peer id and signed its payload under this domain."""
    if peer_id_from_public_key(envelope.public_key) != envelope.peer_id:
        raise RecordError("bad_key", f"the envelope's key is not the key of {envelope.peer_id}")
    try:
        public_key = Ed25519PublicKey.from_public_bytes(envelope.public_key)
    except ValueError as exc:
        raise RecordError("bad_key", "not an Ed25519 public key") from exc
    if _verifies(public_key, envelope, domain):
        return
    for other in _KNOWN_DOMAINS:
        if other != domain and _verifies(public_key, envelope, other):
            raise RecordError("wrong_domain", f"signed for {other}, expected {domain}")
    raise RecordError("bad_signature", f"signature does not verify under {domain}")


def _check_time(body: Value, now: float, skew_s: float, max_lifetime_s: float | None) -> None:
    """A body with `expires_at` is valid until then (plus skew), and not before `issued_at` (minus skew);
    with `max_lifetime_s`, `expires_at - issued_at` may not exceed it (NaN and infinities never pass)."""
    expires_at = getattr(body, "expires_at", None)
    if isinstance(expires_at, float | int) and not now <= expires_at + skew_s:
        raise RecordError("expired", f"expired at {expires_at}, now {now}")
    issued_at = getattr(body, "issued_at", None)
    if isinstance(issued_at, float | int) and not issued_at <= now + skew_s:
        raise RecordError("not_yet_valid", f"issued at {issued_at}, now {now}")
    if (
        max_lifetime_s is not None
        and isinstance(expires_at, float | int)
        and isinstance(issued_at, float | int)
    ):
        lifetime = expires_at - issued_at
        if not 0 <= lifetime <= max_lifetime_s:
            raise RecordError("lifetime", f"valid for {lifetime:.0f} s, at most {max_lifetime_s:.0f} s taken")


def open_envelope(
    envelope: Envelope,
    domain: str,
    cls: type[T],
    *,
    now: float,
    signer: str | None = None,
    recipient: str | None = None,
    skew_s: float = 30.0,
    max_lifetime_s: float | None = None,
) -> T:
    """Verify an envelope and return its body.

    Args:
        envelope: as received.
        domain: the domain it must have been signed under.
        cls: the body type the payload must hold.
        now: the current time (seconds since the epoch, the clock `issued_at`/`expires_at` use).
        signer: the peer id that must have signed it (the Noise-authenticated peer), if known.
        recipient: our own peer id: a body with a `recipient` field (offers, cancels) must name it.
        skew_s: clock skew tolerated on `issued_at` and `expires_at`.
        max_lifetime_s: the longest `expires_at - issued_at` accepted (None: any).

    Returns:
        The verified body.

    Raises:
        RecordError: with `reason` one of bad_key, signer_mismatch, bad_signature, wrong_domain,
            expired, not_yet_valid, malformed, wrong_recipient (only when `recipient` is given) and
            lifetime (only when `max_lifetime_s` is given).
    """
    if signer is not None and signer != envelope.peer_id:
        raise RecordError("signer_mismatch", f"signed by {envelope.peer_id}, expected {signer}")
    _check_signature(envelope, domain)
    try:
        body = unpack_body(envelope.payload, cls)
    except RemoteProtocolError as exc:
        raise RecordError("malformed", exc.detail) from exc
    field = _SIGNER_FIELD.get(cls)
    if field is not None and getattr(body, field) != envelope.peer_id:
        raise RecordError("signer_mismatch", f"{cls.__name__}.{field} is not the signer {envelope.peer_id}")
    if recipient is not None and getattr(body, "recipient", recipient) != recipient:
        raise RecordError("wrong_recipient", f"{cls.__name__} is for another peer, not {recipient}")
    _check_time(body, now, skew_s, max_lifetime_s)
    return body


@final
class NonceCache:
    """Replay guard: remembers each (signer, nonce) until its record can no longer be accepted.

    Pure: time is passed in. Partitioned by signer: each signer may hold at most `share` unexpired
    nonces and all together at most `capacity`, so one signer flooding offers fills only its own
    share; a signer at its share, or any new nonce while the whole cache is full, is refused (fails
    closed: a nonce is never forgotten before its record expires, or the record could be replayed).
    """

    def __init__(self, capacity: int = 100_000, *, share: int | None = None, skew_s: float = 30.0) -> None:
        """Start empty.

        Args:
            capacity: how many unexpired nonces are remembered at most, all signers together.
            share: how many one signer may hold at most (default: a tenth of `capacity`).
            skew_s: kept past `expires_at` as long as `open_envelope` still accepts the record.
        """
        self._capacity = capacity
        self._share = max(1, capacity // 10) if share is None else share
        self._skew_s = skew_s
        self._seen: dict[str, dict[bytes, float]] = {}
        self._count = 0
        self._expiry: list[tuple[float, str, bytes]] = []

    def __len__(self) -> int:
        return self._count

    def held_by(self, signer: str) -> int:
        """How many unexpired nonces of this signer are remembered (as of the last check)."""
        return len(self._seen.get(signer, ()))

    def has_room(self, signer: str, now: float) -> bool:
        """Would a new nonce of this signer be remembered now (its share and the whole cache not full)?"""
        self._purge(now)
        return self.held_by(signer) < self._share and self._count < self._capacity

    def check_and_add(self, signer: str, nonce: bytes, expires_at: float, now: float) -> bool:
        """Record a nonce if it is new.

        Args:
            signer: the peer id that signed the record.
            nonce: the record's nonce.
            expires_at: the record's expiry; the nonce is remembered until then plus skew.
            now: the current time.

        Returns:
            True if the nonce is new (and is now remembered); False for a replay, an already expired
            record, a signer whose share is full, or a full cache.
        """
        self._purge(now)
        mine = self._seen.get(signer, {})
        if nonce in mine or len(mine) >= self._share or self._count >= self._capacity:
            return False
        forget_at = expires_at + self._skew_s
        if not forget_at >= now:
            return False  # expired for everyone (NaN too): refused, and nothing to remember
        mine[nonce] = forget_at
        self._seen[signer] = mine
        self._count += 1
        heapq.heappush(self._expiry, (forget_at, signer, nonce))
        return True

    def _purge(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] < now:
            _, signer, nonce = heapq.heappop(self._expiry)
            mine = self._seen.get(signer)
            if mine is not None and mine.pop(nonce, None) is not None:
                self._count -= 1
                if not mine:
                    del self._seen[signer]
