"""libp2p's kad-dht with our workarounds: the only module beside `node.host` that imports libp2p.

Workarounds (py-libp2p 0.8.1, shared/notes/libp2p.md):

- P12 `KadDHT(protocol_prefix=...)` is ignored on the wire: `PROTOCOL_ID` is imported by value into five
  modules, so `patch_kad` sets it in each to `/sark/kad/1.0.0` before any DHT is built.
- P10/P12 records live for days (providers 48 h, values 24 h): `patch_kad` sets our lifetime; workers
  re-announce on a timer (`node.swarm`).
- P8/T4 updates need `select()` and un-namespaced keys are stored unvalidated: a strict
  `NamespacedValidator` with our `/sark/` validator, `strict_validation=True` on the DHT too.
- P9 `find_providers()` answers from the local cache once it has any entry, with duplicates:
  `find_providers` here pops the local entry first (merging it back on a server) and de-duplicates.
- P20 connecting does not fill the routing table: `bootstrap` adds the gates and runs a self-lookup.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, final

import trio
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.peer.id import ID
from libp2p.records.pubkey import PublicKeyValidator
from libp2p.records.validator import NamespacedValidator, Validator
from libp2p.tools.anyio_service import background_trio_service

from node.host import Host
from protocol import KAD

log = logging.getLogger(__name__)

KAD_MODULES: Final = ("common", "kad_dht", "peer_routing", "provider_store", "value_store")
NAMESPACE: Final = "sark"


def patch_kad(record_ttl_s: float) -> None:
    """Put the DHT on `/sark/kad/1.0.0` and give records our short lifetime (P12, P10)."""
    for name in KAD_MODULES:
        module = importlib.import_module(f"libp2p.kad_dht.{name}")
        module.PROTOCOL_ID = TProtocol(KAD)  # type: ignore[attr-defined]
    provider_store = importlib.import_module("libp2p.kad_dht.provider_store")
    value_store = importlib.import_module("libp2p.kad_dht.value_store")
    common = importlib.import_module("libp2p.kad_dht.common")
    ttl, half = max(1, int(record_ttl_s)), max(1, int(record_ttl_s / 2))
    for module, name, value in (
        (provider_store, "PROVIDER_RECORD_EXPIRATION_INTERVAL", ttl),
        (provider_store, "PROVIDER_RECORD_REPUBLISH_INTERVAL", half),
        (value_store, "DEFAULT_TTL", ttl),
        (value_store, "REPUBLISH_INTERVAL", half),
        (common, "DEFAULT_TTL", ttl),
        (common, "TTL", ttl),
    ):
        setattr(module, name, value)


def kad_protocol_ids() -> dict[str, str]:
    """The protocol id each patched libp2p kad module will use (for the test that pins P12)."""
    return {n: str(importlib.import_module(f"libp2p.kad_dht.{n}").PROTOCOL_ID) for n in KAD_MODULES}


@final
class _RecordValidator(Validator):
    """Adapts our checks (`validate(key, value)`, `select(key, values)`) to libp2p's Validator."""

    def __init__(
        self, validate: Callable[[str, bytes], None], select: Callable[[str, list[bytes]], int]
    ) -> None:
        self._validate = validate
        self._select = select

    def validate(self, key: str, value: bytes) -> None:
        self._validate(key, value)

    def select(self, key: str, values: list[bytes]) -> int:
        return self._select(key, values)


@final
class Kad:
    """A running kad-dht on our host: raw puts, gets, provides and lookups on byte keys."""

    def __init__(self, dht: Any, host: Host, server: bool) -> None:
        self._dht = dht
        self._host = host
        self.server = server

    async def bootstrap(self, peer_ids: list[str]) -> None:
        """Add connected gates to the routing table and look ourselves up (P20)."""
        for peer in peer_ids:
            await self._dht.add_peer(ID.from_base58(peer), skip_server_mode_check=True)
        await self._dht.peer_routing.refresh_routing_table()

    def routing_table_size(self) -> int:
        """Peers in our routing table."""
        return int(self._dht.get_routing_table_size())

    async def put(self, key: str, value: bytes) -> None:
        """Store a value under a `/sark/...` key at the closest peers (and locally)."""
        await self._dht.put_value(key, value)

    async def get_local(self, key: str) -> bytes | None:
        """The value we hold ourselves, if any."""
        record = self._dht.value_store.get(key.encode())
        return None if record is None else bytes(record.value)

    def drop_local(self, key: str) -> None:
        """Forget our copy of a value (an expired or invalid advert)."""
        self._dht.value_store.remove(key.encode())

    async def get(self, key: str) -> bytes | None:
        """The best value for a key: ours if held, else from the network (validated and selected)."""
        value = await self._dht.get_value(key)
        return None if value is None else bytes(value)

    async def provide(self, key: bytes) -> bool:
        """Announce ourselves as a provider of a raw key (ADD_PROVIDER is fire-and-forget, P9)."""
        return bool(await self._dht.provider_store.provide(key))

    async def find_providers(self, key: bytes, count: int = 200) -> dict[str, list[str]]:
        """Providers of a raw key from the network, bypassing the local cache, de-duplicated (P9).

        Returns:
            peer id -> its known multiaddrs.
        """
        store = self._dht.provider_store
        kept = store.providers.pop(key, None)
        try:
            infos = await store.find_providers(key, count)
        finally:
            if self.server and kept is not None:
                store.providers.setdefault(key, {}).update(kept)
            elif not self.server:
                store.providers.pop(key, None)
        if self.server and kept:
            infos = list(infos) + store.get_providers(key)
        found: dict[str, list[str]] = {}
        for info in infos:
            addrs = found.setdefault(info.peer_id.to_base58(), [])
            addrs.extend(str(a) for a in info.addrs if str(a) not in addrs)
        return found


@asynccontextmanager
async def open_kad(
    host: Host,
    mode: Literal["server", "client"],
    record_ttl_s: float,
    validate: Callable[[str, bytes], None],
    select: Callable[[str, list[bytes]], int],
) -> AsyncIterator[Kad]:
    """Run a kad-dht on `/sark/kad/1.0.0` with a strict `/sark/` validator while the block runs."""
    patch_kad(record_ttl_s)
    validator = NamespacedValidator(
        {"pk": PublicKeyValidator(), NAMESPACE: _RecordValidator(validate, select)}, strict_validation=True
    )
    dht_mode = DHTMode.SERVER if mode == "server" else DHTMode.CLIENT
    dht = KadDHT(host.raw, dht_mode, validator=validator, strict_validation=True)
    async with background_trio_service(dht):
        await trio.lowlevel.checkpoint()
        yield Kad(dht, host, mode == "server")


__all__ = ["KAD_MODULES", "Kad", "kad_protocol_ids", "open_kad", "patch_kad"]
