"""Where an endpoint task's requests go: the owner's declared server, or the campaign's URL once checked.

Gray-box: the offer names a model id; the worker sends to the server its owner declared
(`join --endpoint NAME=URL`) whose probe served that id. That URL is the owner's own and never
leaves this worker. Black-box: the campaign's URL passes the worker's URL policy (the SSRF rules of
model downloads) and is resolved once here; the measuring client connects to the checked address.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import final

import trio

import drivers
from node.transfer.endpoints import checked_endpoint_address
from node.transfer.urls import FetchError, UrlPolicy
from protocol import (
    ComputeUnit,
    DeviceProfile,
    Endpoint,
    EndpointStatus,
    FailureReason,
    Measurement,
    Stage,
    TaskSpec,
)

log = logging.getLogger(__name__)


@final
class LiveProfile:
    """This device's profile with its declared servers as last probed: the probe loop writes it, the
    advert, admission and the runner read it (one trio thread, no lock needed)."""

    def __init__(self, profile: DeviceProfile) -> None:
        self.value = profile
        self._changed = trio.Event()

    def get(self) -> DeviceProfile:
        """The profile now."""
        return self.value

    def set(self, profile: DeviceProfile) -> None:
        """Replace the profile and wake whoever waits for a change."""
        self.value = profile
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Wait until the profile is next replaced."""
        await self._changed.wait()


async def probe_declared(declared: Mapping[str, str]) -> tuple[EndpointStatus, ...]:
    """Probe every declared server (name -> URL) in a spawned child (its HTTP client stays out of this
    process): one status per served model, or one saying why none.

    Raises:
        drivers.ProbeFailed: the child failed, died or timed out.
    """
    return await drivers.probe_servers_apart(declared)


async def reprobe_forever(declared: Mapping[str, str], live: LiveProfile, interval_s: float) -> None:
    """Probe the declared servers again every `interval_s` and keep what they serve now. Never returns."""
    while True:
        await trio.sleep(interval_s)
        try:
            statuses = await probe_declared(declared)
        except drivers.ProbeFailed as exc:
            log.warning("declared servers not probed again (%s); keeping the last statuses", exc.detail)
            continue
        if statuses != live.value.endpoints:
            log.info(
                "declared servers now: %s", ", ".join(f"{s.name}:{s.model}:{s.usable}" for s in statuses)
            )
            live.set(live.value.with_(endpoints=statuses))


def endpoint_of(spec: TaskSpec) -> Endpoint | None:
    """The model server a task measures, or None for a model task."""
    return spec.generate.endpoint if spec.generate is not None else None


@dataclass(frozen=True)
class Targets:
    """The declared servers (name -> URL), this device's probe of them, the URL policy, and which
    declared servers run on this device (name -> the unit whose energy covers them)."""

    policy: UrlPolicy
    declared: Mapping[str, str] = field(default_factory=dict)
    live: LiveProfile | None = None
    on_device: Mapping[str, ComputeUnit] = field(default_factory=dict)

    async def resolve(self, endpoint: Endpoint) -> tuple[str, str | None]:
        """The URL to send to and the checked address to connect to (None: the owner's own server).

        Raises:
            FetchError: URL_REFUSED for a URL the policy refuses or a model no declared server serves.
        """
        if endpoint.url is not None:
            return endpoint.url, await checked_endpoint_address(endpoint.url, self.policy)
        return self.declared[self._declared_name(endpoint)], None

    def _declared_name(self, endpoint: Endpoint) -> str:
        served = self.live.get().endpoints if self.live is not None else ()
        for status in served:
            if status.usable and status.model == endpoint.model and status.name in self.declared:
                return status.name
        raise FetchError(FailureReason.URL_REFUSED, f"no declared server here serves {endpoint.model}")

    def energy_unit(self, endpoint: Endpoint) -> ComputeUnit | None:
        """The unit whose energy covers the task's server: only a declared server the owner said runs
        on this device (gray-box); None for any other (its energy is not this device's)."""
        if endpoint.url is not None:
            return None
        return self.on_device.get(self._declared_name(endpoint))

    async def measure(self, spec: TaskSpec, endpoint: Endpoint, stop: trio.CancelScope) -> Measurement:
        """Resolve the target and run the task's requests against it until done or `stop` is cancelled.

        Raises:
            FetchError: the target is refused (see `resolve`).
            TaskFailed: CANCELLED when `stop` was cancelled (the submitter cancelled the task).
        """
        url, address = await self.resolve(endpoint)
        measurement = None
        with stop:
            options = drivers.EndpointOptions(connect_ip=address, energy_unit=self.energy_unit(endpoint))
            measurement = await in_own_loop(spec, url, options)
        if measurement is None:
            raise drivers.TaskFailed(FailureReason.CANCELLED, "cancelled by the submitter", Stage.RUN)
        return measurement


async def in_own_loop(spec: TaskSpec, url: str, options: drivers.EndpointOptions) -> Measurement:
    """`drivers.measure_endpoint` on a trio loop of its own, in a thread: a client holding thousands of
    requests (a rate it cannot keep) runs each of its scheduling batches for seconds (4,500 tasks
    checkpointing every 2 ms of work: 9 s), and on this node's loop that batch silenced the lease's
    heartbeats until the submitter took it back. In a thread, the node's loop gets the interpreter
    at every switch interval (5 ms). Cancelling this (the submitter's cancel, the node stopping)
    cancels the client's loop through its token; its thread ends within one checkpoint. The client's
    own failures (`TaskFailed`, `FetchError`) come out as they are."""
    cancelled = threading.Event()
    inner: list[tuple[trio.lowlevel.TrioToken, trio.CancelScope]] = []

    async def client() -> Measurement:
        with trio.CancelScope() as scope:
            inner.append((trio.lowlevel.current_trio_token(), scope))
            if cancelled.is_set():  # cancelled before the loop was there to be told
                scope.cancel()
            return await drivers.measure_endpoint(spec, url, options)
        raise drivers.TaskFailed(FailureReason.CANCELLED, "cancelled by the submitter", Stage.RUN)

    try:
        # trio_typing's stubs (libp2p's dependency) still call the flag `cancellable`
        return await trio.to_thread.run_sync(trio.run, client, abandon_on_cancel=True)  # type: ignore[call-arg]
    except trio.Cancelled:
        cancelled.set()
        for token, scope in inner:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(scope.cancel)
        raise


__all__ = ["LiveProfile", "Targets", "endpoint_of", "in_own_loop", "probe_declared", "reprobe_forever"]
