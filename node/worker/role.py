"""Composition of the worker role: profile, cache, outbox, runner, negotiation, blob, advertising."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import trio
from pydantic import ValidationError

import drivers
from node.config import NodeConfig
from node.errors import ConfigError, DeviceProbeFailed
from node.events import EventSink, quiet
from node.ownerkey import owner_statement, read_owner_key
from node.p2p.node import Node, open_node
from node.p2p.wire import Channel
from node.transfer.blob import UploadSlots, blob_handler
from node.transfer.cache import ModelCache, model_cache
from node.transfer.urls import url_policy
from node.worker.advertising import Advertised, serve_worker
from node.worker.challenge import Challenges
from node.worker.clock import serve_clock
from node.worker.negotiator import Negotiator, OfferPolicy
from node.worker.outbox import Outbox
from node.worker.runner import Runner
from node.worker.targets import LiveProfile, Targets, probe_declared, reprobe_forever
from protocol import BLOB, CHALLENGE, CHALLENGE_UNITS, CLOCK, NEGOTIATE, DeviceProfile, field_problems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerHandle:
    """A running worker, for tests and the embedded swarm."""

    node: Node
    profile: DeviceProfile
    runner: Runner
    advertised: Advertised


async def _open_blob(node: Node, peer_id: str, addrs: tuple[str, ...]) -> Channel:
    return await node.host.open_channel(peer_id, BLOB, addrs=addrs, read_timeout=30.0)


async def device_profile(config: NodeConfig, profile: DeviceProfile | None = None) -> DeviceProfile:
    """This device's profile (detected unless given), named by `--device-name` if set, priced by
    `--price-per-hour` if set, with its declared model servers as probed now, both in a spawned child:
    this long-running process never loads a runtime.

    Raises:
        DeviceProbeFailed: the probe child failed, died or timed out.
        ConfigError: a name or fact the profile may not carry (`checked`).
    """
    try:
        if profile is None:
            profile = await drivers.detect_profile_apart(
                config.data.calibration,
                calibrate=config.calibrate,
                declared=config.endpoints,
                probe_cache=config.probe_cache or config.data.calibration,
            )
        elif config.endpoints:
            profile = profile.with_(endpoints=await probe_declared(config.endpoints))
    except drivers.ProbeFailed as exc:
        raise DeviceProbeFailed(exc.stage, exc.why) from exc
    if config.device_name:
        profile = profile.with_(device_name=config.device_name)
    if config.price_per_hour is not None:
        profile = profile.with_(price_per_hour=config.price_per_hour)
    return checked(profile)


def checked(profile: DeviceProfile) -> DeviceProfile:
    """The profile validated again (`with_` does not), as every peer will check it: the worker
    refuses to advertise a name or fact with a control character or past its length.

    Raises:
        ConfigError: naming each bad field.
    """
    try:
        return DeviceProfile.model_validate(profile.model_dump())
    except ValidationError as exc:
        raise ConfigError("profile", "; ".join(field_problems(exc, root="profile"))) from exc


def offer_policy(config: NodeConfig) -> OfferPolicy:
    """Which offers this worker takes, as its configuration says."""
    return OfferPolicy(
        allow=frozenset(config.allow),
        open_mode=config.open_mode,
        max_model_bytes=config.max_model_bytes,
        allow_code_models=config.allow_code_models,
        lease_ttl_s=config.lease_ttl_s,
        heartbeat_s=config.heartbeat_s,
        max_offer_lifetime_s=config.max_offer_lifetime_s,
    )


@asynccontextmanager
async def open_worker(
    config: NodeConfig,
    profile: DeviceProfile | None = None,
    *,
    events: EventSink = quiet,
    challenged: bool = True,
) -> AsyncIterator[WorkerHandle]:
    """Start a worker: detect the device (unless given), advertise (with its owner's statement when
    an owner key is set), take offers; stop on exit. `challenged`: whether a submitter may challenge
    its claims (an embedded worker's only submitter, its own process, never does: no spare child)."""
    owner_seed = read_owner_key(config.owner_key) if config.owner_key is not None else None
    profile = await device_profile(config, profile)
    live = LiveProfile(profile)
    cache = model_cache(config)
    async with open_node(config, role="worker") as node:
        uploads = UploadSlots(config.upload_peers)  # shared: no upload while a measurement runs
        runner = _runner(config, node, profile, live, cache, uploads, events)
        negotiator = Negotiator(
            peer_id=node.host.peer_id,
            profile=profile,
            runner=runner,
            policy=offer_policy(config),
            is_relayed=node.host.is_relayed,
            has_model=lambda sha: cache.path_for(sha) is not None,
            events=events,
            live=live.get,
        )
        challenges = _challenges(config, profile, events)
        handlers = {
            NEGOTIATE: negotiator.handle,
            CLOCK: serve_clock,
            CHALLENGE: challenges.serve,
            CHALLENGE_UNITS: challenges.serve_unit,
            BLOB: blob_handler(cache, is_relayed=node.host.is_relayed, slots=uploads, events=events),
        }
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.serve)
            if challenged and challenges.claims:  # a CPU challenge child ready before it is asked
                nursery.start_soon(challenges.keep_spare)
            owner = owner_statement(owner_seed, node.host.peer_id)
            advertised = await nursery.start(
                partial(serve_worker, handlers=handlers, live=live.get, owner=owner),
                node,
                profile,
                runner.load,
            )
            if config.endpoints:
                nursery.start_soon(reprobe_forever, config.endpoints, live, config.endpoint_probe_s)
            log.info("worker %s ready (%s)", node.host.peer_id, advertised.reachability)
            yield WorkerHandle(node=node, profile=profile, runner=runner, advertised=advertised)
            nursery.cancel_scope.cancel()


def _runner(
    config: NodeConfig,
    node: Node,
    profile: DeviceProfile,
    live: LiveProfile,
    cache: ModelCache,
    uploads: UploadSlots,
    events: EventSink,
) -> Runner:
    """The worker's task runner: its queue, the model cache, the outbox and the declared servers."""
    return Runner(
        peer_id=node.host.peer_id,
        private_key=node.host.private_key,
        profile=profile,
        cache=cache,
        outbox=Outbox(config.data.outbox),
        policy=url_policy(config),
        open_blob=lambda peer, addrs: _open_blob(node, peer, addrs),
        max_queue=config.max_queue,
        allow_code_models=config.allow_code_models,
        events=events,
        uploads=uploads,
        targets=Targets(url_policy(config), config.endpoints, live, config.endpoints_on_device),
    )


def _challenges(config: NodeConfig, profile: DeviceProfile, events: EventSink) -> Challenges:
    """The worker's challenge service: one challenge at a time, both kinds, each round bounded by this
    worker's own claim (the CPU's, and each CUDA device's in GFLOPS)."""
    cal = profile.calibration
    claimed = cal.cpu_claim if cal is not None else None
    gpus = {device: tflops * 1e3 for device, tflops in cal.gpu_tflops.items()} if cal is not None else {}
    return Challenges(
        frozenset(config.allow),
        open_mode=config.open_mode,
        claimed_gflops=claimed,
        gpu_claims=gpus,
        events=events,
    )
