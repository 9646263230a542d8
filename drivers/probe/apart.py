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
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

import trio
from pydantic import ValidationError

from drivers.errors import ProbeFailed
from drivers.measuring.childio import next_message, stopped
from drivers.measuring.spawning import Entry, NotStarted, start_child
from drivers.probe import cache
from protocol import DeviceProfile, EndpointStatus

log = logging.getLogger(__name__)

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
        kept: the facts and units from the probe cache (`drivers.probe.cache`) as JSON: the device is
            not probed again, only calibrated.
    """

    device: bool
    cache_dir: str | None = None
    calibrate: bool = True
    declared: Mapping[str, str] = field(default_factory=dict)
    kept: str | None = None  # a cached profile's JSON (facts and units): the child calibrates it only


async def detect_profile_apart(
    cache_dir: Path | None,
    *,
    calibrate: bool = True,
    declared: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    probe_cache: Path | None = None,
) -> DeviceProfile:
    """This device's profile, with its declared servers probed, detected in a spawned child.

    With `probe_cache` (a folder), the facts and units a probe found on this unchanged machine are
    reused from it (`drivers.probe.cache`): the child then only calibrates and probes the servers,
    which are taken at every start. A probe that ran is kept there for the next start.

    Raises:
        ProbeFailed: the child failed, died or timed out; `stage` says where.
    """
    declared = dict(declared or {})
    key = ""
    kept: DeviceProfile | None = None
    if probe_cache is not None:
        key = cache.probe_key(cache.key_inputs())
        found = cache.read(probe_cache, key)
        kept = found.profile
        log.info("device probe %s: %s (%s)", "reused" if kept else "runs", found.why, found.path)
    job = _device_job(cache_dir, calibrate, declared)
    if kept is not None:
        job = replace(job, device=calibrate, kept=kept.model_dump_json())
    limit = timeout_s or PROFILE_TIMEOUT_S + SERVER_TIMEOUT_S * len(declared)
    if kept is not None and not calibrate and not declared:
        return kept  # nothing left to take: no child at all
    text = await _run_apart(job, limit)
    if kept is not None and not calibrate:  # the child probed the servers alone
        return kept.with_(endpoints=_statuses(text))
    try:
        profile = DeviceProfile.model_validate_json(text)
    except ValidationError as exc:
        raise ProbeFailed("result", f"the profile sent is not valid ({exc.error_count()} errors)") from exc
    if probe_cache is not None and kept is None:
        try:
            cache.store(probe_cache, key, profile)
        except OSError as exc:  # a cache that cannot be written costs the next start a probe, no more
            log.warning("device probe not kept in %s: %s", probe_cache, exc)
    return profile


def _statuses(text: str) -> tuple[EndpointStatus, ...]:
    """The servers' statuses a child sent as JSON.

    Raises:
        ProbeFailed: at "result", when they are not valid.
    """
    try:
        return tuple(EndpointStatus.model_validate(item) for item in json.loads(text))
    except (ValueError, TypeError) as exc:
        raise ProbeFailed("result", f"the child's server statuses are not valid: {exc}") from exc


def _device_job(cache_dir: Path | None, calibrate: bool, declared: dict[str, str]) -> ProbeJob:
    """The job that detects the device; the cache folder made absolute (the child runs elsewhere)."""
    folder = os.path.abspath(cache_dir) if cache_dir is not None else None
    return ProbeJob(True, folder, calibrate, declared)


async def probe_servers_apart(
    declared: Mapping[str, str], *, timeout_s: float | None = None
) -> tuple[EndpointStatus, ...]:
    """The declared servers' statuses (one per served model, or one saying why none), probed in a child.

    Raises:
        ProbeFailed: the child failed, died or timed out; `stage` says where.
    """
    job = ProbeJob(False, declared=dict(declared))
    return _statuses(await _run_apart(job, timeout_s or SERVER_TIMEOUT_S * max(1, len(declared))))


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
    folder = Path(job.cache_dir) if job.cache_dir is not None else None
    if job.device and job.kept is not None:
        from drivers.probe.profile import calibrated

        profile = calibrated(DeviceProfile.model_validate_json(job.kept), folder, on_stage=enter)
    elif job.device:
        from drivers.probe.profile import detect_profile

        profile = detect_profile(folder, calibrate=job.calibrate, on_stage=enter)
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
