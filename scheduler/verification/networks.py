"""Independence by network: which network a replica's host is on, so one machine is one vote.

One owner can mint any number of keys, and one machine can listen on many addresses: two loopback
addresses, two addresses of one IPv6 /64 (a host is usually given a whole /64), a v4 address and its
`::ffff:` form. Compared as strings these are distinct hosts; compared here they are one network. A
quorum counts networks: IPv4 by /24, IPv6 by /64, a v4-mapped v6 address as its v4 address, every
loopback address (127.0.0.0/8, ::1) as one. An unknown host (a relayed peer, whose address the submitter
never saw, or text that is no address) is "": it never counts toward a quorum (`replicas.pick_replicas`
places it in no replicated group). What this cannot separate: one owner with machines on several
networks (README, "What verification proves").
"""

from __future__ import annotations

import ipaddress
from typing import Final

IPV4_PREFIX: Final = 24
"""An IPv4 network: a /24 (one site's LAN or one hosting provider's block)."""
IPV6_PREFIX: Final = 64
"""An IPv6 network: a /64 (what one host or one LAN is usually given)."""
LOOPBACK: Final = "loopback"
"""Every loopback address, v4 or v6: the submitter's own machine, one host."""


def network_of(host: str) -> str:
    """The network `host` (an IP address as the submitter's connection saw it) counts as: its /24
    or /64 in CIDR form, `LOOPBACK`, or "" when it is no address (unknown, relayed)."""
    try:
        ip = ipaddress.ip_address(host.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return ""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return LOOPBACK
    if ip.is_unspecified or ip.is_multicast:
        return ""
    prefix = IPV4_PREFIX if ip.version == 4 else IPV6_PREFIX
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))
