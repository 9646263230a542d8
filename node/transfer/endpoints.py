"""Which model-server URLs a worker may measure: the model-URL policy, applied before the child runs.

A black-box endpoint comes from a campaign, so it is untrusted like a model URL: the same `UrlPolicy`
rules apply (https to public addresses unless the owner widens them). The host is resolved here,
every address is checked, and the checked address goes to the measuring child, which connects to it
and keeps the host only for `Host` and TLS SNI: a second resolution (DNS rebinding) cannot swap it.
A server the owner declared (gray-box) is the owner's own choice and is not checked here.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

import trio

from node.transfer.urls import FetchError, UrlPolicy, refused
from protocol import FailureReason

RESOLVE_TIMEOUT_S: Final = 10.0


async def checked_endpoint_address(url: str, policy: UrlPolicy) -> str:
    """Check an endpoint URL and resolve it to an address the policy allows.

    Returns:
        The IP address the child must connect to.

    Raises:
        FetchError: URL_REFUSED for a URL or an address the policy refuses, FETCH if it cannot resolve.
    """
    policy.check_url(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with trio.fail_after(RESOLVE_TIMEOUT_S):
            infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    except (OSError, trio.TooSlowError) as exc:
        raise FetchError(FailureReason.FETCH, f"resolving {host}: {type(exc).__name__}: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise refused(f"{host} resolved to no address")
    for address in addresses:
        policy.check_address(address)
    return addresses[0]


__all__ = ["checked_endpoint_address"]
