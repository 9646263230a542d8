"""Where an endpoint task's requests go: the owner's declared server, or the campaign's URL once checked.

Gray-box: the offer names a model id; the worker sends to the server its owner declared
(`join --endpoint NAME=URL`) whose probe served that id. That URL is the owner's own and never
leaves this worker. Black-box: the campaign's URL passes the worker's URL policy (the SSRF rules of
model downloads) and is resolved once here; the measuring client connects to the checked address.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from node.transfer.endpoints import checked_endpoint_address
from node.transfer.urls import FetchError, UrlPolicy
from protocol import DeviceProfile, Endpoint, FailureReason, TaskSpec


def endpoint_of(spec: TaskSpec) -> Endpoint | None:
    """The model server a task measures, or None for a model task."""
    return spec.generate.endpoint if spec.generate is not None else None


@dataclass(frozen=True)
class Targets:
    """The declared servers (name -> URL), this device's probe of them, and the URL policy."""

    policy: UrlPolicy
    declared: Mapping[str, str] = field(default_factory=dict)
    profile: DeviceProfile | None = None

    async def resolve(self, endpoint: Endpoint) -> tuple[str, str | None]:
        """The URL to send to and the checked address to connect to (None: the owner's own server).

        Raises:
            FetchError: URL_REFUSED for a URL the policy refuses or a model no declared server serves.
        """
        if endpoint.url is not None:
            return endpoint.url, await checked_endpoint_address(endpoint.url, self.policy)
        served = self.profile.endpoints if self.profile is not None else ()
        for status in served:
            if status.usable and status.model == endpoint.model and status.name in self.declared:
                return self.declared[status.name], None
        raise FetchError(FailureReason.URL_REFUSED, f"no declared server here serves {endpoint.model}")


__all__ = ["Targets", "endpoint_of"]
