"""Which model URLs a worker may fetch: https to public addresses, unless its owner widens that.

Every spelling of a host is normalised and checked (numeric forms like `127.1`, `2130706433` and
`0x7f.1` included), and every resolved address must be global: loopback, private, link-local and
metadata, CGNAT, multicast, reserved and IPv4-embedding IPv6 ranges are refused, unless the owner
allows a network (`allow_networks`). `node.transfer.fetch` connects to the checked address itself.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Final, final
from urllib.parse import urlsplit

from node.config import NodeConfig
from node.errors import NodeError
from protocol import FailureReason

_HOST_NAME_RE: Final = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")
_NUMERIC_LABEL_RE: Final = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_UNSAFE_CHARS_RE: Final = re.compile(r"[\x00-\x20\x7f\\]")
# IPv6 ranges that embed or translate an IPv4 address: the address behind them is not the one checked.
_EMBEDDING_V6: Final = (
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64
    ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64
)


class PeerTrouble(enum.StrEnum):
    """What the peer a /sark/blob fetch asked did, when the fetch failed because of it."""

    UNREACHABLE = "unreachable"
    """No connection could be made: not worth waiting for."""
    BUSY = "busy"
    """It refused the stream (its per-peer cap): it has the model and is spreading it."""
    MEASURING = "measuring"
    """It has the model but serves no one while its own measurement runs: ask another source now."""


class FetchError(NodeError):
    """A model could not be fetched; `reason` is what the task's `Failure` carries.

    Attributes:
        reason: URL_REFUSED, TOO_LARGE, DIGEST_MISMATCH or FETCH.
        detail: the specific cause, for people and logs.
        peer: for a /sark/blob fetch that failed because of the peer, what it did (else None).
    """

    def __init__(self, reason: FailureReason, detail: str, *, peer: PeerTrouble | None = None) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.peer = peer


def refused(detail: str) -> FetchError:
    return FetchError(FailureReason.URL_REFUSED, detail)


@dataclass(frozen=True)
class Target:
    """A checked URL, split into what the connection needs."""

    url: str
    scheme: str
    host: str
    port: int
    request_target: str

    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@final
@dataclass(frozen=True)
class UrlPolicy:
    """Which model URLs a worker may fetch, and how much of them.

    Attributes:
        allow_http: accept plain `http` (tests, loopback servers); `https` only otherwise.
        allow_networks: CIDRs the owner explicitly allows although they are not global.
        max_bytes: cap on the body, checked on `Content-Length` and while streaming.
        timeout_s: deadline for the whole download, redirects included.
    """

    allow_http: bool = False
    allow_networks: tuple[str, ...] = ()
    max_bytes: int = 2 << 30
    timeout_s: float = 600.0
    _networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        nets = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in self.allow_networks)
        object.__setattr__(self, "_networks", nets)

    def check_url(self, url: str) -> None:
        """Refuse a URL on its text alone: scheme, userinfo, odd characters, ambiguous hosts.

        Raises:
            FetchError: reason URL_REFUSED, with why.
        """
        self._target(url)

    def check_address(self, ip: str) -> None:
        """Refuse an address that is not globally routable, unless the owner allows its network.

        Raises:
            FetchError: reason URL_REFUSED, with why.
        """
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError as exc:
            raise refused(f"not an IP address: {ip!r}") from exc
        if any(addr.version == net.version and addr in net for net in self._networks):
            return
        why = _non_global_reason(addr)
        if why:
            raise refused(f"address {addr} is {why}")

    def _target(self, url: str) -> Target:
        if _UNSAFE_CHARS_RE.search(url):
            raise refused("URL contains whitespace, control characters or a backslash")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise refused(f"malformed URL: {exc}") from exc
        allowed = ("https", "http") if self.allow_http else ("https",)
        if parts.scheme not in allowed:
            raise refused(f"scheme {parts.scheme!r} not allowed (only {', '.join(allowed)})")
        if "@" in parts.netloc:
            raise refused("URL carries userinfo (user@host)")
        host = parts.hostname or ""
        self._check_host(host)
        if port == 0:
            raise refused("port 0")
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        default_port = 443 if parts.scheme == "https" else 80
        return Target(url, parts.scheme, host, port or default_port, target)

    def _check_host(self, host: str) -> None:
        if not host:
            raise refused("URL has no host")
        if not host.isascii():
            raise refused("non-ASCII host (use its punycode form)")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            self.check_address(host)
            return
        if ":" in host or "%" in host:
            raise refused(f"malformed IPv6 literal {host!r}")
        if _NUMERIC_LABEL_RE.match(host.rstrip(".").rsplit(".", 1)[-1]):
            raise refused(f"non-canonical numeric host {host!r} (octal, hex or short IPv4 form)")
        if len(host) > 253 or not _HOST_NAME_RE.match(host):
            raise refused(f"malformed host name {host!r}")
        if host.rstrip(".").endswith(".localhost"):
            raise refused(f"{host!r} is a loopback name (RFC 6761)")


def _non_global_reason(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why an address is not a public unicast one, or "" if it is."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return "IPv4-mapped IPv6"
        if addr.sixtofour is not None or addr.teredo is not None:
            return "6to4 or Teredo (embeds an IPv4 address)"
        if any(addr in net for net in _EMBEDDING_V6):
            return "IPv4-compatible or NAT64 (embeds an IPv4 address)"
        if addr.is_site_local:
            return "site-local"
    checks = (
        (addr.is_unspecified, "unspecified"),
        (addr.is_loopback, "loopback"),
        (addr.is_link_local, "link-local (cloud metadata lives here)"),
        (addr.is_multicast, "multicast"),
        (addr.is_private, "private"),
        (addr.is_reserved, "reserved"),
        (not addr.is_global, "not globally routable (e.g. CGNAT)"),
    )
    return next((why for hit, why in checks if hit), "")


def url_policy(config: NodeConfig) -> UrlPolicy:
    """The model-download rules a node's owner set: https to public addresses unless widened."""
    return UrlPolicy(
        allow_http=config.allow_http,
        allow_networks=config.allow_networks,
        max_bytes=config.max_model_bytes,
    )
