"""Multiaddrs: parsing user input, peer ids, and which of our addresses a peer can really dial.

No libp2p import (only `multiaddr`), so that the CLI checks addresses without loading libp2p.

A wildcard listen address (`/ip4/0.0.0.0`, `/ip6/::`) is what we bind, not an address anyone can
dial: `announced` expands it into the machine's interface addresses and ranks them (public, then
private, then link-local, then loopback); `dial_order` lets a dialer try the addresses on its own
networks first. Both are pure: `local_interfaces` is the one function here that asks the system.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Sequence
from typing import Final, final

import multiaddr

from node.errors import ConfigError

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
"""An interface address with its network (`10.0.0.5/24`)."""

WILDCARDS: Final = {"ip4": "0.0.0.0", "ip6": "::"}


def printable(value: str) -> bool:
    """No control character (C0, DEL, C1) and no line or paragraph separator: text that can go into a
    systemd unit line, a plist or one terminal line as it is."""
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in value)


def parse_multiaddr(addr: str, *, field: str = "address") -> multiaddr.Multiaddr:
    """A multiaddr from user input, or a `ConfigError` naming the field (the `multiaddr` package
    accepts a trailing newline: refused here, with every other control character and space)."""
    if not printable(addr) or " " in addr:
        raise ConfigError(field, f"not a valid multiaddr (a space or control character): {addr!r}")
    try:
        return multiaddr.Multiaddr(addr)
    except Exception as exc:  # multiaddr raises a zoo of types for bad input
        raise ConfigError(field, f"not a valid multiaddr: {addr!r}") from exc


def parse_gate(addr: str, *, field: str = "--gate") -> str:
    """A gate address from user input: a multiaddr ending in `/p2p/<the gate's peer id>` (what
    `sark-node gate` prints), or a `ConfigError` naming the field. Without the peer id no connection
    could be authenticated, so it is bad input, found before anything is dialled."""
    parse_multiaddr(addr, field=field)
    if "/p2p/" not in addr:
        raise ConfigError(
            field, f"no /p2p/<peer id> in {addr!r} (a gate address ends in /p2p/ and the gate's id)"
        )
    return addr


def parse_peer_id(value: str, *, field: str = "--allow") -> str:
    """A libp2p peer id from user input (base58btc multihash, as `sark-node id` prints it), or a
    `ConfigError` naming the field."""
    if not value or "/" in value or not printable(value) or " " in value:
        raise ConfigError(field, f"not a peer id: {value!r}")
    try:
        multiaddr.Multiaddr(f"/p2p/{value}")  # the p2p codec checks the base58 multihash
    except Exception as exc:
        raise ConfigError(field, f"not a peer id: {value!r}") from exc
    return value


def peer_of(addr: str) -> str:
    """The last `/p2p/<id>` of a multiaddr (the destination, also for a circuit address)."""
    parts = addr.rstrip("/").split("/")
    ids = [parts[i + 1] for i, p in enumerate(parts[:-1]) if p == "p2p"]
    if not ids:
        raise ConfigError("address", f"no /p2p/<peer id> in {addr!r}")
    return ids[-1]


def without_p2p(addr: str) -> multiaddr.Multiaddr:
    """The transport part of a multiaddr: everything before its first `/p2p/`."""
    return multiaddr.Multiaddr(addr.split("/p2p/", 1)[0])


def local_interfaces() -> list[IPInterface]:
    """The addresses of this machine's interfaces that are up and running (psutil; never raises)."""
    import psutil

    try:
        stats = psutil.net_if_stats()
        found = psutil.net_if_addrs()
    except OSError:
        return []
    out: list[IPInterface] = []
    for name, addrs in found.items():
        st = stats.get(name)
        flags = getattr(st, "flags", "running").split(",") if st is not None else []
        if st is None or not st.isup or "running" not in flags:
            continue  # a bridge with nothing plugged in (docker0) is up but not running
        for a in addrs:
            try:
                out.append(ipaddress.ip_interface(f"{a.address.split('%', 1)[0]}/{a.netmask}"))
            except ValueError:
                continue  # AF_PACKET (a MAC address) and anything else that is not IP
    return out


def _ip(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP of `/ip4/...` or `/ip6/...` (None for a DNS name or anything else)."""
    parts = addr.split("/")
    if len(parts) < 3 or parts[1] not in WILDCARDS:
        return None
    try:
        return ipaddress.ip_address(parts[2])
    except ValueError:
        return None


def ip_of(addr: str) -> str | None:
    """The IP of an `/ip4/...` or `/ip6/...` multiaddr as text (None for a DNS name or anything else)."""
    ip = _ip(addr)
    return None if ip is None else str(ip)


def _with_ip(addr: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    parts = addr.split("/")
    return "/".join(["", f"ip{ip.version}", str(ip), *parts[3:]])


def expand(listen: Sequence[str], local: Sequence[IPInterface]) -> list[str]:
    """Each wildcard listen address as one address per local IP of its family (link-local left out:
    dialling one needs the interface's zone, which a multiaddr does not carry); others as they are."""
    out: list[str] = []
    for addr in listen:
        ip = _ip(addr)
        if ip is None or not ip.is_unspecified:
            out.append(addr)
            continue
        out += [_with_ip(addr, i.ip) for i in local if i.version == ip.version and not i.ip.is_link_local]
    return out


def scope(addr: str) -> int:
    """Rank of an address's reach: 0 public (or a DNS name), 1 private, 2 link-local, 3 loopback."""
    ip = _ip(addr)
    if ip is None or ip.is_global:
        return 0
    if ip.is_loopback:
        return 3
    return 2 if ip.is_link_local else 1


def announced(listen: Sequence[str], local: Sequence[IPInterface], observed: Sequence[str] = ()) -> list[str]:
    """The addresses to advertise: wildcards expanded, plus `observed` (addresses a peer reached us
    at), no unspecified address, each once, ranked by `scope` (the order kept within a scope)."""
    seen: list[str] = []
    for addr in [*expand(listen, local), *observed]:
        ip = _ip(addr)
        if addr not in seen and (ip is None or not ip.is_unspecified):
            seen.append(addr)
    return sorted(seen, key=scope)


@final
class AddressBook:
    """A host's own addresses: the interfaces (read again at most every `max_age_s`: psutil takes
    about 2 ms) and the addresses peers reached us at; `announce` is libp2p's `addrs_factory`."""

    def __init__(self, max_age_s: float = 5.0) -> None:
        self._max_age_s = max_age_s
        self._read_at = -math.inf
        self._interfaces: list[IPInterface] = []
        self._reached: list[str] = []

    def interfaces(self) -> list[IPInterface]:
        """This machine's running interfaces, at most `max_age_s` old."""
        now = time.monotonic()
        if now - self._read_at > self._max_age_s:
            self._interfaces, self._read_at = local_interfaces(), now
        return self._interfaces

    def reached_at(self, addr: str) -> None:
        """A peer dialled us at `addr` (`/p2p/` and after ignored): announced from now on."""
        transport = addr.split("/p2p/", 1)[0]
        if transport not in self._reached:
            self._reached.append(transport)

    def announce(self, bound: list[multiaddr.Multiaddr]) -> list[multiaddr.Multiaddr]:
        """The bound addresses as `announced`, with the interfaces and the addresses that reached us."""
        return [
            multiaddr.Multiaddr(a)
            for a in announced([str(a) for a in bound], self.interfaces(), self._reached)
        ]


def dial_order(addrs: Sequence[str], local: Sequence[IPInterface]) -> list[str]:
    """A peer's addresses in the order to dial them from here: those on one of our networks first
    (the same LAN), then the rest as the peer ranked them, loopback last; but a peer that advertises
    one of our own interface addresses runs on this machine, and is dialled on loopback first (the
    traffic never leaves the kernel; were it another machine with the same private address, loopback
    fails at once and the next address is tried)."""
    mine = {i.ip for i in local if not i.ip.is_loopback}
    here = any(_ip(a) in mine for a in addrs)

    def key(addr: str) -> int:
        ip = _ip(addr)
        if ip is not None and ip.is_loopback:
            return -1 if here else 2
        near = ip is not None and any(ip in i.network for i in local if i.version == ip.version)
        return 0 if near else 1

    return sorted(addrs, key=key)


def undialable(addrs: Sequence[str], circuits: Sequence[str], gates: Sequence[str]) -> str | None:
    """Why peers cannot dial a worker that advertises `addrs` and `circuits`, or None if they can.

    Loopback addresses count only for peers on this machine: a worker whose gates are elsewhere and
    which has only loopback addresses and no relay circuit is out of reach of every submitter there.
    """
    if circuits:
        return None
    if not addrs:
        return "it advertises no address and no relay circuit"
    remote_gate = any(scope(g) != 3 for g in gates)
    if remote_gate and all(scope(a) == 3 for a in addrs):
        return f"it advertises only loopback addresses ({', '.join(addrs)}) and no relay circuit"
    return None


__all__ = [
    "AddressBook",
    "IPInterface",
    "announced",
    "dial_order",
    "expand",
    "ip_of",
    "local_interfaces",
    "parse_gate",
    "parse_multiaddr",
    "parse_peer_id",
    "peer_of",
    "printable",
    "scope",
    "undialable",
    "without_p2p",
]
