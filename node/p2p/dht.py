"""Our records in the DHT: signed adverts under short keys, capability provider keys, checked lookups.

An advert lives under `/sark/<40 hex of sha256(peer id)>` (46 bytes: libp2p drops keys over 50, P7) as a
msgpack-packed `Envelope` (domain `sark/advert/v1`) whose signer is the key's owner. The validator
checks signer, expiry, lifetime and size on every put and get; `select` keeps the highest seq.
That value is a cache on gates that run our validator; provider keys are standard (the sha2-256
multihash of the capability string) so that any kad-dht server keeps them, and a submitter can always
ask a provider itself for its advert over `/sark/profile` (issue 15).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Final, final

import trio

from node.p2p.addrs import peer_of
from node.p2p.kad import Kad, ProviderLookup
from protocol import (
    DOMAIN_ADVERT,
    AdvertBody,
    ComputeUnit,
    Envelope,
    ProtocolError,
    RecordError,
    capability_key,
)
from protocol.codec import pack_body, unpack_body
from protocol.records import open_envelope

ADVERT_MAX_BYTES: Final = 8192
ADVERT_MAX_LIFETIME_S: Final = 3600.0

log = logging.getLogger(__name__)

PROVIDE_CHECKS_S: Final = (0.2, 0.5, 1.0, 2.0, 4.0)
"""Pauses between reading our provider records back and providing again (ADD_PROVIDER can be lost)."""


def advert_key(peer_id: str) -> str:
    """The DHT key of a peer's advert (46 bytes)."""
    return "/sark/" + hashlib.sha256(peer_id.encode()).hexdigest()[:40]


SHA2_256_MULTIHASH: Final = b"\x12\x20"
"""Multihash prefix of a sha2-256 digest: code 0x12, length 32."""
RAW_CODEC: Final = 0x55


def capability_dht_key(unit: ComputeUnit | None) -> bytes:
    """The provider key of a compute unit (None: any worker): the multihash of its capability string.

    Standard kad-dht servers read a provider key as a CID's multihash and refuse anything else
    ("Invalid CID"), so the key is sha2-256 in multihash form (0x12 0x20 + 32-byte digest, 34 bytes);
    an API that wants a CID gets `capability_cid` (v1, raw codec), whose multihash is these bytes.
    """
    return SHA2_256_MULTIHASH + hashlib.sha256(capability_key(unit).encode()).digest()


def capability_cid(unit: ComputeUnit | None) -> str:
    """The capability key as a CIDv1 string (raw codec, base32 `b...`), for tools that take a CID."""
    cid = bytes([0x01, RAW_CODEC]) + capability_dht_key(unit)
    return "b" + base64.b32encode(cid).decode().lower().rstrip("=")


def check_advert(key: str, value: bytes, now: float) -> tuple[Envelope, AdvertBody]:
    """Verify an advert value found under `key`.

    Raises:
        RecordError: oversized, undecodable, badly signed, signed by someone other than the key's
            owner, expired, or living longer than an hour.
    """
    if len(value) > ADVERT_MAX_BYTES:
        raise RecordError("size", f"{len(value)} bytes > {ADVERT_MAX_BYTES}")
    try:
        envelope = unpack_body(value, Envelope)
    except ProtocolError as exc:
        raise RecordError("decode", exc.detail) from exc
    if advert_key(envelope.peer_id) != key:
        raise RecordError("signer", f"{envelope.peer_id} does not own {key}")
    body = open_envelope(envelope, DOMAIN_ADVERT, AdvertBody, now=now, signer=envelope.peer_id)
    if body.peer_id != envelope.peer_id:
        raise RecordError("signer", f"advert for {body.peer_id} signed by {envelope.peer_id}")
    if body.expires_at <= now:
        raise RecordError("expired", f"expired at {body.expires_at:.0f}, now {now:.0f}")
    if body.expires_at - body.issued_at > ADVERT_MAX_LIFETIME_S:
        lifetime = body.expires_at - body.issued_at
        raise RecordError("lifetime", f"{lifetime:.0f} s > {ADVERT_MAX_LIFETIME_S:.0f} s")
    return envelope, body


def select_advert(key: str, values: list[bytes], now: float) -> int:
    """The index of the valid advert with the highest seq (0 when none is valid)."""
    best, best_seq = 0, -1
    for index, value in enumerate(values):
        try:
            _, body = check_advert(key, value, now)
        except RecordError:
            continue
        if body.seq > best_seq:
            best, best_seq = index, body.seq
    return best


def validate_record(key: str, value: bytes) -> None:
    """libp2p's `validate` for the `/sark/` namespace, at the current time."""
    check_advert(key, value, time.time())


def select_record(key: str, values: list[bytes]) -> int:
    """libp2p's `select` for the `/sark/` namespace, at the current time."""
    return select_advert(key, values, time.time())


@final
class Dht:
    """Adverts and capability providers over a running kad-dht."""

    def __init__(self, kad: Kad) -> None:
        self.kad = kad

    async def publish(
        self, envelope: Envelope, units: Iterable[ComputeUnit], *, gates: Sequence[str] = ()
    ) -> tuple[str, ...]:
        """Put our advert and provide the any-worker key and one key per usable unit, concurrently.

        ADD_PROVIDER is fire-and-forget (P9) and a busy server drops some: each key is read back
        from the servers, and the any-worker key from each gate, and provided again, with a growing
        pause, until we are listed.

        Returns:
            The gates (addresses) that still do not list us: they refused or dropped our records.
        """
        keys = [capability_dht_key(unit) for unit in (None, *units)]
        me = envelope.peer_id
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.kad.put, advert_key(me), pack_body(envelope))
            for key in keys:
                nursery.start_soon(self.kad.provide, key)
        lacking: list[str] = []
        for pause in PROVIDE_CHECKS_S:
            missing = [key for key in keys if me not in await self.kad.find_providers(key)]
            lacking = [g for g in gates if me not in (await self.kad.providers_at(peer_of(g), keys[0]) or ())]
            if not missing and not lacking:
                return ()
            await trio.sleep(pause)
            async with trio.open_nursery() as nursery:
                for key in missing or keys:
                    nursery.start_soon(self.kad.provide, key)
        log.info("provider records of %s not confirmed by %s", me, ", ".join(lacking) or "any server")
        return tuple(lacking)

    async def put_advert(self, envelope: Envelope) -> None:
        """Put our advert alone, providing nothing: a leaving worker's last, short-lived one replaces the
        copies the servers hold (highest seq wins) and expires soon after (kad-dht has no unprovide)."""
        await self.kad.put(advert_key(envelope.peer_id), pack_body(envelope))

    async def lookup(self, unit: ComputeUnit | None) -> ProviderLookup:
        """Providers of a unit (None: any worker) with what each server said (answered, refused)."""
        return await self.kad.lookup_providers(capability_dht_key(unit))

    async def providers(self, unit: ComputeUnit | None) -> dict[str, list[str]]:
        """Peers providing a unit (None: any worker), from the network, de-duplicated."""
        return await self.kad.find_providers(capability_dht_key(unit))

    async def advert(self, peer_id: str, now: float) -> tuple[Envelope, AdvertBody] | None:
        """A peer's verified, unexpired advert with the highest seq any server holds, or None.

        Every value read is checked again here (T4 on get): a forged, expired or oversized value a
        server hands out is skipped, and an invalid copy of our own is dropped.
        """
        key = advert_key(peer_id)
        best: tuple[Envelope, AdvertBody] | None = None
        for value in await self.kad.get(key):
            try:
                envelope, body = check_advert(key, value, now)
            except RecordError:
                if await self.kad.get_local(key) == value:
                    self.kad.drop_local(key)
                continue
            if best is None or body.seq > best[1].seq:
                best = envelope, body
        return best


__all__ = [
    "ADVERT_MAX_BYTES",
    "Dht",
    "advert_key",
    "capability_cid",
    "capability_dht_key",
    "check_advert",
    "select_advert",
    "select_record",
    "validate_record",
]
