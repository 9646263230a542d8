"""Hypothesis strategies for every wire message kind and every signed body, within the models' constraints."""

from __future__ import annotations

from typing import Any, get_args

from hypothesis import strategies as st

import protocol as pr
from protocol import (
    AdvertBody,
    CancelBody,
    ComputeUnit,
    DeviceProfile,
    Envelope,
    Load,
    Measurement,
    Message,
    ModelFormat,
    ModelRef,
    OfferBody,
    ReleaseBody,
    ResultBody,
    RunConditions,
    Stats,
    TaskSpec,
)
from protocol import messages as m
from protocol.base import SHA256_PATTERN
from protocol.messages import ID_PATTERN
from protocol.values import Calibration, GpuInfo, UnitStatus

ALL_KINDS: frozenset[str] = frozenset(
    str(cls.model_fields["kind"].default) for cls in get_args(get_args(Message)[0])
)

ids = st.from_regex(ID_PATTERN, fullmatch=True)
sha256s = st.from_regex(SHA256_PATTERN, fullmatch=True)
texts = st.text(max_size=40)
details = st.text(max_size=200)
# a profile's names and facts are printable (protocol.values.ProfileFact): no C0, DEL, C1, bidi
facts = st.text(
    st.characters(
        blacklist_categories=("Cc", "Cs", "Zl", "Zp"),
        blacklist_characters="\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
    ),
    max_size=40,
)
floats = st.floats(allow_nan=False, width=64)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
non_negative = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
u32 = st.integers(min_value=0, max_value=2**32)
u64 = st.integers(min_value=0, max_value=2**64 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small_dict_floats = st.dictionaries(texts, finite, max_size=3)
str_tuples = st.lists(texts, max_size=3).map(tuple)
# an advert's addresses: printable, non-empty (protocol.values.AdvertAddrs)
addr_tuples = st.lists(facts.filter(bool), max_size=3).map(tuple)

envelopes = st.builds(
    Envelope,
    peer_id=st.text(max_size=128),
    public_key=st.binary(min_size=32, max_size=32),
    payload=st.binary(max_size=300),
    signature=st.binary(min_size=64, max_size=64),
)
loads = st.builds(Load, running=u32, queued=u32, max_queue=u32, cpu_busy=non_negative, mem_available_mb=u32)
stats = st.builds(
    Stats,
    n=u32,
    min=finite,
    max=finite,
    mean=finite,
    median=finite,
    stddev=finite,
    p90=finite,
    p95=finite,
    p99=finite,
    cv=finite,
    mad=finite,
    iqr=finite,
    outliers=i64,
)
task_specs = st.builds(
    TaskSpec,
    compute_unit=st.sampled_from(ComputeUnit),
    runs=st.integers(1, 13_107),  # x 20 processes stays within MAX_SAMPLES
    warmups=st.integers(0, 10_000),
    warmup_until_stable=st.booleans(),
    load_runs=st.integers(1, 100),
    processes=st.integers(1, 20),
    timeout_s=st.floats(min_value=0.001, max_value=86_400),
    input_shapes=st.dictionaries(texts, st.lists(u32, max_size=4).map(tuple), max_size=3),
    strict_placement=st.booleans(),
    threads=st.none() | st.integers(1, 1024),
    memory_limit_mb=st.none() | st.integers(16, 2**40),
)
model_refs = st.builds(
    ModelRef,
    name=st.text(min_size=1, max_size=60),
    size=u64,
    sha256=sha256s,
    format=st.sampled_from(ModelFormat),
    sources=str_tuples,
)
profiles = st.builds(
    DeviceProfile,
    device_name=facts,
    soc=facts,
    cores_physical=u32,
    cores_logical=u32,
    ram_mb=u32,
    os=facts,
    os_version=facts,
    arch=facts,
    device_year=st.none() | st.integers(1990, 2100),
    gpus=st.lists(
        st.builds(
            GpuInfo,
            name=facts,
            vram_mb=u32,
            driver=facts,
            source=st.sampled_from(["nvml", "torch", "nvidia-smi"]),
        ),
        max_size=2,
    ).map(tuple),
    gpu_reason=texts,
    runtimes=st.dictionaries(facts, facts, max_size=3),
    units=st.lists(
        st.builds(
            UnitStatus,
            unit=st.sampled_from(ComputeUnit),
            usable=st.booleans(),
            reason=texts,
            provider=st.none() | facts,
        ),
        max_size=3,
    ).map(tuple),
    fingerprint=facts,
    calibration=st.none()
    | st.builds(
        Calibration,
        cpu_gflops=non_negative,
        mem_bandwidth_gbs=non_negative,
        gpu_tflops=st.dictionaries(facts, finite, max_size=3),
        seconds=non_negative,
        key=facts,
    ),
)
measurements = st.builds(
    Measurement,
    compute_unit=st.sampled_from(ComputeUnit),
    load_ms=stats,
    load_first_ms=floats,
    first_inference_ms=floats,
    warmups_used=u32,
    inference_ms=stats,
    samples_ms=st.lists(finite, max_size=20).map(tuple),
    process_medians_ms=st.lists(finite, max_size=3).map(tuple),
    process_spread_pct=finite,
    peak_load_ram_mb=non_negative,
    peak_inference_ram_mb=non_negative,
    cpu_cores_used=non_negative,
    cpu_time_s=non_negative,
    gpu_util_pct=st.none() | finite,
    gpu_mem_mb=st.none() | finite,
    providers=str_tuples,
    node_share=small_dict_floats,
    fallback=st.booleans(),
    unstable=st.booleans(),
    unstable_reasons=str_tuples,
    conditions=st.builds(
        RunConditions,
        intra_op_threads=st.none() | u32,
        inter_op_threads=st.none() | u32,
        spinning=st.none() | st.booleans(),
        background_cores=finite,
        thermal=texts,
        power=texts,
        runtime_versions=st.dictionaries(texts, texts, max_size=3),
        model_sha256=texts,
    ),
)
nonces = st.binary(min_size=16, max_size=32)

BODIES: dict[type[Any], st.SearchStrategy[Any]] = {
    OfferBody: st.builds(
        OfferBody,
        campaign_id=ids,
        task_id=ids,
        submitter=texts,
        recipient=texts,
        nonce=nonces,
        issued_at=floats,
        expires_at=floats,
        spec=task_specs,
        model=model_refs,
        priority=st.integers(0, 100),
        submitter_addrs=str_tuples,
    ),
    CancelBody: st.builds(
        CancelBody,
        task_id=ids,
        lease_id=st.none() | ids,
        recipient=texts,
        nonce=nonces,
        issued_at=floats,
        expires_at=floats,
        reason=details,
    ),
    ResultBody: st.builds(
        ResultBody,
        campaign_id=ids,
        task_id=ids,
        lease_id=ids,
        worker=texts,
        submitter=texts,
        model_sha256=texts,
        device=profiles,
        measurement=measurements,
        finished_at=floats,
    ),
    ReleaseBody: st.builds(
        ReleaseBody,
        campaign_id=ids,
        task_id=ids,
        lease_id=ids,
        worker=texts,
        submitter=texts,
        issued_at=floats,
        reason=details,
    ),
    AdvertBody: st.builds(
        AdvertBody,
        peer_id=texts,
        seq=u64,
        issued_at=floats,
        expires_at=floats,
        addrs=addr_tuples,
        circuit_addrs=addr_tuples,
        reachability=st.sampled_from(["direct", "relayed", "unknown"]),
        profile=profiles,
        load=loads,
    ),
}

MESSAGES: dict[str, st.SearchStrategy[Any]] = {
    "offer": st.builds(m.Offer, task_id=ids, envelope=envelopes),
    "commit": st.builds(
        m.Commit,
        task_id=ids,
        lease_id=ids,
        lease_ttl_s=st.floats(min_value=0.001, max_value=3600),
        queue_position=u32,
    ),
    "decline": st.builds(m.Decline, task_id=ids, reason=st.sampled_from(m.DeclineReason), detail=details),
    "dispatch": st.builds(m.Dispatch, task_id=ids, lease_id=ids),
    "progress": st.builds(
        m.Progress,
        task_id=ids,
        lease_id=ids,
        phase=st.sampled_from(m.Phase),
        done=u32,
        total=u32,
        queue_position=u32,
        median_ms=st.none() | finite,
    ),
    "result": st.builds(m.Result, task_id=ids, lease_id=ids, envelope=envelopes),
    "failure": st.builds(
        m.Failure, task_id=ids, lease_id=ids, reason=st.sampled_from(m.FailureReason), detail=details
    ),
    "ack": st.builds(m.Ack, task_id=ids, lease_id=ids),
    "cancel": st.builds(m.Cancel, task_id=ids, lease_id=st.none() | ids, envelope=envelopes),
    "reclaim": st.builds(m.Reclaim, task_id=ids, lease_id=ids),
    "release": st.builds(m.Release, task_id=ids, lease_id=ids, envelope=envelopes),
    "blob_get": st.builds(m.BlobGet, sha256=sha256s, offset=u64, length=st.none() | u64),
    "blob_meta": st.builds(m.BlobMeta, sha256=sha256s, size=u64),
    "blob_chunk": st.builds(m.BlobChunk, offset=u64, data=st.binary(max_size=2000)),
    "blob_end": st.builds(m.BlobEnd),
    "blob_missing": st.builds(m.BlobMissing, sha256=texts, detail=details),
    "profile_get": st.builds(m.ProfileGet),
    "profile": st.builds(m.ProfileReply, advert=envelopes, load=loads),
    "reach_get": st.builds(m.ReachGet, addrs=st.lists(texts, max_size=16).map(tuple)),
    "reach": st.builds(m.ReachReply, reachable=st.booleans(), addr=st.none() | texts, detail=details),
    "clock_get": st.builds(pr.ClockGet, round=st.integers(min_value=0, max_value=7)),
    "clock": st.builds(pr.ClockReply, round=st.integers(min_value=0, max_value=7), now=finite),
    "challenge_open": st.builds(pr.ChallengeOpen),
    "challenge_unit_open": st.builds(
        pr.ChallengeUnitOpen, unit=st.sampled_from(pr.ComputeUnit), device=st.sampled_from(["cuda:0", "cpu"])
    ),
    "challenge_ready": st.builds(pr.ChallengeReady),
    "challenge_ping": st.builds(pr.ChallengePing, round=st.integers(min_value=0, max_value=8)),
    "challenge_pong": st.builds(pr.ChallengePong, round=st.integers(min_value=0, max_value=8)),
    "challenge_chain_seed": st.builds(
        pr.ChallengeChainSeed,
        round=st.integers(min_value=0, max_value=2),
        n=st.integers(min_value=64, max_value=16384),
        steps=st.integers(min_value=1, max_value=2048),
        seed=st.integers(min_value=0, max_value=2**63 - 1),
    ),
    "challenge_commit": st.builds(
        pr.ChallengeCommit, round=st.integers(min_value=0, max_value=2), digests=st.binary(max_size=2000)
    ),
    "challenge_reveal": st.builds(
        pr.ChallengeReveal,
        round=st.integers(min_value=0, max_value=2),
        rows=st.lists(st.integers(min_value=0, max_value=16383), min_size=1, max_size=32).map(tuple),
    ),
    "challenge_rows": st.builds(
        pr.ChallengeRows,
        round=st.integers(min_value=0, max_value=2),
        rows=st.lists(st.binary(max_size=1024), max_size=4).map(tuple),
    ),
    "challenge_failed": st.builds(pr.ChallengeFailed, reason=st.text(max_size=500)),
    "busy": st.builds(m.Busy, detail=details, measuring=st.booleans()),
}

any_message: st.SearchStrategy[Any] = st.one_of(*MESSAGES.values())
