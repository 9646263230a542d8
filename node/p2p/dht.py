"""Our records in the DHT: signed adverts under short keys, capability provider keys, checked lookups.

An advert lives under `/sark/<40 hex of sha256(peer id)>` (46 bytes: libp2p drops keys over 50, P7) as a
msgpack-packed `Envelope` (domain `sark/advert/v1`) whose signer is the key's owner. The validator
checks signer, expiry, lifetime and size on every put and get; `select` keeps the highest seq.
That value is a cache on gates that run our validator (put at `ADVERT_COPIES` of the closest servers,
not k: a submitter confirms every worker over `/sark/profile` anyway); provider keys are standard
(the sha2-256 multihash of the capability string) so that any kad-dht server keeps them, and a
submitter can always ask a provider itself for its advert over `/sark/profile` (issue 15).

Provider keys are sharded (issue 43, `node.p2p.shards`): a worker provides one key of each unit's tree
(the any-worker tree and one per usable unit), found once by reading down its path to the first key
that is not full (as most of its holders' networks say: `_place`), and then only re-provided: no
read-back, whatever the fleet. A lookup (`Dht.lookup`, read by `node.p2p.lookup`) reads the tree level
by level and stops at the count asked; when it is still short it also reads the `sark/cap/v1/` key of
the unit, where workers before issue 43 provide (which a new worker does not: an old submitter does not
find new workers; upgrade submitters first). Our servers keep at most `SHARD_CAP` providers per key and
`PROVIDERS_PER_KEY` under the old keys (`provider_bound`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Final, final

import trio

from node.p2p.addrs import peer_of
from node.p2p.kad import ADVERT_COPIES, Kad, ProviderLookup
from node.p2p.kadpatch import PROVIDERS_PER_KEY
from node.p2p.looktime import no_delay
from node.p2p.lookup import NO_HINTS, Hints, read_tree
from node.p2p.shards import SHARD_CAP, Shard, is_full, path_of
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

EVERY_PROVIDER: Final = 10**6
"""The count a placement reads a key with: every holder's answer, never ended at a count that one
holder's list reaches alone (whether a key is full is its holders' majority's word, `_place`)."""
PROVIDE_CHECKS_S: Final = (0.2, 0.5, 1.0, 2.0, 4.0)
"""Pauses between reading our new shard keys back and providing again (ADD_PROVIDER can be lost)."""


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


OLD_KEYS: Final = frozenset(capability_dht_key(u) for u in (None, *ComputeUnit))
"""The provider keys of workers before issue 43: one per unit, unbounded but by `PROVIDERS_PER_KEY`."""


def provider_bound(key: bytes) -> int:
    """How many providers our servers keep under a key: `SHARD_CAP`, the old unsharded keys aside."""
    return PROVIDERS_PER_KEY if key in OLD_KEYS else SHARD_CAP


def capability_cid(unit: ComputeUnit | None) -> str:
    """The capability key as a CIDv1 string (raw codec, base32 `b...`), for tools that take a CID."""
    return _cid(capability_dht_key(unit))


def shard_cid(shard: Shard) -> str:
    """A shard key as a CIDv1 string (raw codec, base32): what a js-libp2p or Kubo client asks for."""
    return _cid(shard.dht_key)


def _cid(multihash: bytes) -> str:
    cid = bytes([0x01, RAW_CODEC]) + multihash
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
    """Adverts and capability providers over a running kad-dht.

    Attributes:
        kad: the kad-dht underneath.
        cap: providers a shard key holds (`SHARD_CAP`; a test uses a small one).
        placed: the shard key we provide for each unit (None: any worker), once found.
    """

    def __init__(self, kad: Kad, cap: int = SHARD_CAP) -> None:
        self.kad = kad
        self.cap = cap
        self.placed: dict[ComputeUnit | None, Shard] = {}
        self._lacking: tuple[str, ...] = ()

    async def publish(
        self,
        envelope: Envelope,
        units: Iterable[ComputeUnit],
        *,
        gates: Sequence[str] = (),
        circuits: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """Put our advert and provide our key of each tree (any worker, each usable unit).

        `circuits`: our circuit addresses (a relayed worker's), carried by the provider records too
        (`Kad.circuits`): a reader whose servers keep no advert dials us through them.

        A unit not yet placed is placed first (its path read down to a key with room) and its key read
        back from the servers, and the any-worker key from each gate, providing again with a growing
        pause until we are listed (ADD_PROVIDER is fire-and-forget, P9). A placed key is only
        provided again: a refresh costs one ADD_PROVIDER per unit, whatever the fleet, except where
        its walk is due (about every `closest.REWALK_S`): that walk reads the key back (`_read_back`).

        Returns:
            The gates (addresses) that did not list us when we last placed a key.
        """
        me = envelope.peer_id
        self.kad.circuits = tuple(circuits)
        fresh = [unit for unit in (None, *units) if unit not in self.placed]
        for unit in fresh:
            await self._place(me, unit)
        placed = [unit for unit in (None, *units) if unit in self.placed]
        due = [u for u in placed if u not in fresh and self.kad.walk_due(self.placed[u].dht_key)]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.kad.put, advert_key(me), pack_body(envelope), ADVERT_COPIES)
            for unit in placed:
                if unit in due:
                    nursery.start_soon(self._read_back, me, unit)
                else:
                    nursery.start_soon(self.kad.provide, self.placed[unit].dht_key)
        if fresh and None in self.placed:
            self._lacking = await self._confirm(me, fresh, gates)
        return self._lacking

    async def _place(self, me: str, unit: ComputeUnit | None, below: int = -1) -> None:
        """Find our key of a unit's tree: the first of our path under level `below` that is not full.

        A key is full when holders on more than half of the networks of its holders that answered list
        `cap` providers (`ProviderLookup.holds`). Before, it was the union of what they listed: hostile
        servers near the keys listing 20 Sybils under every key made every key read full, and each
        honest worker walked its path to the bottom and was listed nowhere (`tests/labs/swarm/
        test_hostile_places.py`). The cheater's view: it chooses its servers' ids (near every key: the
        keys are public strings) and their lists, not the networks of the honest holders beside them.
        What it does not stop: hostile servers on more than half of a key's holders' networks, and real
        records (Sybils that provide a key at its honest holders fill it, at a cost per key)."""
        self.placed.pop(unit, None)
        for shard in path_of(me, unit)[below + 1 :]:
            read = await self.kad.lookup_providers(shard.dht_key, EVERY_PROVIDER)
            if not is_full(read.holds, me in read.providers, self.cap):
                self.placed[unit] = shard
                return
        log.warning("every key of %s's tree is full: not listed", unit or "any worker")

    async def _read_back(self, me: str, unit: ComputeUnit | None) -> None:
        """A placed key's refresh whose walk is due: the walk reads the key back from every holder and
        sends our record to each that answered (`Kad.provide_where_missing`). When holders on more than
        half of the networks that answered read it full and do not list us, we are placed again below
        it, where a reader descends (`lookup`: the children of a key full by that same word).

        Hostile DHT servers ground near a key after we placed there (its holders' networks now mostly
        theirs) keep no record of ours and list Sybils: a reader's walk, which ends at a majority of
        the k closest, lost us for as long as they stayed (`benchmarks/notes/swarm_hostile.md`). Now
        for one walk period at most. The cheater's view: it chooses its servers' ids, lists and
        timing, not the networks of the honest holders beside them; one honest holder that still
        lists us among its hostile neighbours does not keep us there. Half of the networks is not
        enough to move us: we would leave the key to the hostile half, which reads not full by its
        networks once the honest records expire, and a reader would not descend to us."""
        level = self.placed[unit].level
        read = await self.kad.provide_where_missing(self.placed[unit].dht_key, refresh=True)
        if read.ours or not is_full(read.holds, False, self.cap):
            return
        log.info("%s's key at level %d reads full without us: placing below it", unit or "any worker", level)
        await self._place(me, unit, below=level)
        if unit in self.placed:
            await self.kad.provide(self.placed[unit].dht_key)

    async def _confirm(
        self, me: str, units: list[ComputeUnit | None], gates: Sequence[str]
    ) -> tuple[str, ...]:
        """Read our newly placed keys back from their k closest servers (one shard each: a bounded
        answer), sending again to each that lacks us (`Kad.provide_where_missing`) and providing again
        until listed; a key that filled up meanwhile (others placed there at once) spills us over."""
        lacking: list[str] = []
        for pause in PROVIDE_CHECKS_S:
            missing: list[bytes] = []
            for unit in [u for u in units if u in self.placed]:
                read = await self.kad.provide_where_missing(self.placed[unit].dht_key)
                if me not in read.providers and is_full(read.holds, False, self.cap):
                    await self._place(me, unit, below=self.placed[unit].level)
                if me not in read.providers and unit in self.placed:
                    missing.append(self.placed[unit].dht_key)
            any_key = self.placed[None].dht_key if None in self.placed else capability_dht_key(None)
            lacking = [g for g in gates if me not in (await self.kad.providers_at(peer_of(g), any_key) or ())]
            if not missing and not lacking:
                return ()
            await trio.sleep(pause)
            async with trio.open_nursery() as nursery:
                for key in missing or [self.placed[u].dht_key for u in units if u in self.placed]:
                    nursery.start_soon(self.kad.provide, key)
        log.info("provider records of %s not confirmed by %s", me, ", ".join(lacking) or "any server")
        return tuple(lacking)

    async def put_advert(self, envelope: Envelope) -> None:
        """Put our advert alone, providing nothing: a leaving worker's last, short-lived one replaces the
        copies the servers hold (highest seq wins) and expires soon after (kad-dht has no unprovide)."""
        await self.kad.put(advert_key(envelope.peer_id), pack_body(envelope), ADVERT_COPIES)

    async def lookup(
        self,
        unit: ComputeUnit | None,
        count: int | None = None,
        hints: Hints = NO_HINTS,
        *,
        into: dict[str, list[str]] | None = None,
        run_delay: Callable[[], float] = no_delay,
    ) -> ProviderLookup:
        """Providers of a unit (None: any worker), with what each server said (answered, refused): its
        tree read over our kad at our cap until `count` providers not in `hints.known` (None: all), and
        its key from before issue 43 (`node.p2p.lookup.read_tree`, whose arguments these are)."""
        key = capability_dht_key(unit)
        return await read_tree(
            self.kad, unit, key, count, hints, into=into, cap=self.cap, run_delay=run_delay
        )

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
    "OLD_KEYS",
    "Dht",
    "advert_key",
    "capability_cid",
    "capability_dht_key",
    "check_advert",
    "provider_bound",
    "select_advert",
    "select_record",
    "shard_cid",
    "validate_record",
]
