"""The device probe, calibration and declared-server probes in a spawned child, for a light daemon.

Probing a device imports every runtime it has (onnxruntime, torch, coremltools, NVML) and runs tiny
models on each; calibration multiplies matrices with numpy. A long-running `join` process that did
this itself would keep those libraries mapped for good (hundreds of MiB), so a fresh `spawn` child
does it and sends back the profile as JSON, which the parent parses with the protocol's model. The
child tells its stage as it goes (start, device, calibration, units, servers, result); a child that
fails, dies or outlives its deadline is a `ProbeFailed` naming that stage. The parent imports no
runtime: `drivers.probe.profile` and `drivers.endpoint.servers` are imported in the child only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

import trio
from pydantic import ValidationError

from drivers.errors import ProbeFailed
from drivers.measuring.childio import next_message, stopped
from drivers.measuring.spawning import Entry, NotStarted, start_child
from protocol import DeviceProfile, EndpointStatus

PROFILE_TIMEOUT_S: Final = 300.0  # a cold page cache makes `import torch` alone take 10 s
SERVER_TIMEOUT_S: Final = 40.0  # per declared server: drivers.endpoint.servers gives each 30 s, plus start-up


@dataclass(frozen=True)
class ProbeJob:
    """What the child probes.

    Attributes:
        device: detect the device (facts, calibration, compute units); False: the servers only.
        cache_dir: where the calibration is cached (None: not cached).
        calibrate: measure (or reuse) the calibration.
        declared: the owner's declared model servers, name -> URL, to probe.
    """

    device: bool
    cache_dir: str | None = None
    calibrate: bool = True
    declared: Mapping[str, str] = field(default_factory=dict)


async def detect_profile_apart(
    cache_dir: Path | None,
    *,
    calibrate: bool = True,
    declared: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> DeviceProfile:
    """This device's profile, with its declared servers probed, detected in a spawned child.

    Raises:
        ProbeFailed: the child failed, died or timed out; `stage` says where.
    """
    declared = dict(declared or {})
    job = _device_job(cache_dir, calibrate, declared)
    limit = timeout_s or PROFILE_TIMEOUT_S + SERVER_TIMEOUT_S * len(declared)
    text = await _run_apart(job, limit)
    try:
        return DeviceProfile.model_validate_json(text)
    except ValidationError as exc:
        raise ProbeFailed("result", f"the profile sent is not valid ({exc.error_count()} errors)") from exc


def _device_job(cache_dir: Path | None, calibrate: bool, declared: dict[str, str]) -> ProbeJob:
    """The job that detects the device; the cache folder made absolute (the child runs elsewhere)."""
    cache = os.path.abspath(cache_dir) if cache_dir is not None else None
    return ProbeJob(True, cache, calibrate, declared)


async def probe_servers_apart(
    declared: Mapping[str, str], *, timeout_s: float | None = None
) -> tuple[EndpointStatus, ...]:
    """The declared servers' statuses (one per served model, or one saying why none), probed in a child.

    Raises:
        ProbeFailed: the child failed, died or timed out; `stage` says where.
    """
    job = ProbeJob(False, declared=dict(declared))
    text = await _run_apart(job, timeout_s or SERVER_TIMEOUT_S * max(1, len(declared)))
    try:
        return tuple(EndpointStatus.model_validate(item) for item in json.loads(text))
    except (ValueError, TypeError) as exc:
        raise ProbeFailed("result", f"the child's server statuses are not valid: {exc}") from exc


async def _run_apart(job: ProbeJob, timeout_s: float) -> str:
    """Start the child, follow its stages, return its JSON text; kill it on timeout or cancel."""
    try:
        child = start_child(Entry(__name__, "main"), (job,), name="sark-probe")
    except NotStarted as exc:
        raise ProbeFailed("start", exc.detail) from None
    stage = "start"
    try:
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    message = await next_message(child)
                except NotStarted as exc:
                    raise ProbeFailed(stage, exc.detail) from None
                if message is None:
                    await stopped(child)
                    raise ProbeFailed(stage, child.ended())
                if message[0] == "stage":
                    stage = message[1]
                elif message[0] == "failed":
                    raise ProbeFailed(message[1], message[2])
                elif message[0] == "result":
                    text: str = message[1]
                    return text
        raise ProbeFailed(stage, f"timed out after {timeout_s:g} s")
    finally:
        await stopped(child)


def main(conn: Connection, job: ProbeJob) -> None:
    """Entry point of the spawned child: probe, send the JSON text or the failure; never raises."""
    stage = "start"

    def enter(name: str) -> None:
        nonlocal stage
        stage = name
        conn.send(("stage", name))

    try:
        conn.send(("result", _probe(job, enter)))
    except Exception as exc:  # process boundary: a value for the parent, never a traceback
        text = str(exc).strip()
        conn.send(("failed", stage, f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"))
    finally:
        conn.close()


def _probe(job: ProbeJob, enter: Callable[[str], None]) -> str:
    """The device's profile (with the servers' statuses), or the servers' statuses alone, as JSON."""
    profile = None
    if job.device:
        from drivers.probe.profile import detect_profile

        cache = Path(job.cache_dir) if job.cache_dir is not None else None
        profile = detect_profile(cache, calibrate=job.calibrate, on_stage=enter)
    endpoints: tuple[EndpointStatus, ...] = ()
    if job.declared:
        from drivers.endpoint.servers import probe_servers

        enter("servers")
        endpoints = probe_servers(dict(job.declared))
    enter("result")
    if profile is None:
        return json.dumps([status.model_dump(mode="json") for status in endpoints])
    return profile.with_(endpoints=endpoints).model_dump_json()


__all__ = ["ProbeJob", "detect_profile_apart", "main", "probe_servers_apart"]
