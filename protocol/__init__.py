"""Pure wire protocol of sark-node: no networking, no clock, no randomness.

Modules:
    units     compute units, runtimes, DHT capability keys
    base      the frozen Value base (with its checked `with_`), summary Stats, pydantic errors by field
    values    domain values: device profile, model reference, task spec, measurement
    generation  generate workloads (LLMs, model servers): spec, per-request records, aggregates
    tokenizer   a pinned tokenizer.json: pin (name, sha256, compressed bytes), unpack, Pinned (encode),
                shared by the submitter's datasets and the worker's token counts
    fleet     fleet load: one member's deal of a shared schedule, the clock probe messages
    arrivals  the one seeded arrival generator (SplitMix64, Poisson send times) of open-loop load
    telemetry live device telemetry of a timed phase, sustained-run spec, windows and throttle causes
    windows   windows over time from samples, marks and telemetry; a sustained run's throttling verdict
    stats     summary statistics of a sample, process spread, the stability verdict
    genstats  a generate run's aggregate from its records, as FORMULAS says
    clientload  whether the load client held its schedule: send rate, send lag, saturation and why
    rouge     ROUGE-1/2/L F1, no external package
    capacity  capacity under an SLO: the level search, over-saturation, the knee (derived again)
    aggregate derive: a measurement's figures from its raw parts (worker and submitter alike)
    energy    a measured phase's energy readings (per process) and the figures derived from them
    messages  wire messages of every protocol, tagged by `kind`, and the signed bodies
    codec     msgpack encoding with explicit limits
    framing   varint length prefix, incremental decoder, frame cap
    machine   the per-task negotiation state machine (`Conversation`)
    records   Ed25519 signed envelopes bound to libp2p peer ids
    errors    ProtocolError, LocalProtocolError, RemoteProtocolError, RecordError
    text      one seam per medium for peer- and campaign-written text (visible, for_rich, for_csv, ...)
"""

from __future__ import annotations

from protocol.aggregate import derive
from protocol.base import Stats, Value, field_problems
from protocol.capacity import CapacityLevel, CapacityResult, LevelEnd
from protocol.codec import decode, encode, pack_body, unpack_body
from protocol.energy import EnergyFigures, EnergyReading
from protocol.errors import LocalProtocolError, ProtocolError, RecordError, RemoteProtocolError
from protocol.fleet import CLOCK, ClockGet, ClockReply, FleetDeal
from protocol.framing import MAX_FRAME, FrameDecoder, frame
from protocol.generation import (
    FORMULAS,
    CapacitySpec,
    ChatMessage,
    Endpoint,
    ErrorKind,
    GenerateSpec,
    GenerationStats,
    Prompt,
    RequestRecord,
    Rouge,
    Slo,
    TokenizerPin,
)
from protocol.machine import TRANSITIONS, Conversation, Role, State
from protocol.messages import (
    BLOB,
    DOMAIN_ADVERT,
    DOMAIN_CANCEL,
    DOMAIN_OFFER,
    DOMAIN_RELEASE,
    DOMAIN_RESULT,
    KAD,
    MAX_ENVELOPE,
    NEGOTIATE,
    PROFILE,
    REACH,
    Ack,
    AdvertBody,
    BlobChunk,
    BlobEnd,
    BlobGet,
    BlobMeta,
    BlobMissing,
    Busy,
    Cancel,
    CancelBody,
    Commit,
    Decline,
    DeclineReason,
    Dispatch,
    Envelope,
    Failure,
    FailureReason,
    Holder,
    Message,
    NegotiateMessage,
    Offer,
    OfferBody,
    Phase,
    ProfileGet,
    ProfileReply,
    Progress,
    Reachability,
    ReachGet,
    ReachReply,
    Reclaim,
    Release,
    ReleaseBody,
    Result,
    ResultBody,
    Stage,
)
from protocol.records import (
    NonceCache,
    open_envelope,
    peer_id_from_public_key,
    public_key_from_peer_id,
    public_key_of,
    seal,
)
from protocol.telemetry import (
    Sustained,
    SustainSpec,
    Telemetry,
    TelemetryPoint,
    ThrottleCause,
    Window,
)
from protocol.text import control_characters, for_csv, for_html, for_markdown, for_rich, visible
from protocol.units import ANY_WORKER_KEY, GPU_UNITS, RUNTIME_OF, ComputeUnit, Runtime, capability_key
from protocol.values import (
    MAX_ADVERT_ADDRS,
    MAX_ADVERT_CIRCUITS,
    MAX_INPUT_DATA,
    MAX_SAMPLES,
    Calibration,
    DeviceProfile,
    EndpointStatus,
    GpuInfo,
    InputData,
    InputFed,
    Load,
    Measurement,
    ModelFormat,
    ModelRef,
    ProfileFact,
    ProfileName,
    RunConditions,
    TaskSpec,
    UnitStatus,
)

__all__ = [
    "ANY_WORKER_KEY",
    "BLOB",
    "CLOCK",
    "DOMAIN_ADVERT",
    "DOMAIN_CANCEL",
    "DOMAIN_OFFER",
    "DOMAIN_RELEASE",
    "DOMAIN_RESULT",
    "FORMULAS",
    "GPU_UNITS",
    "KAD",
    "MAX_ADVERT_ADDRS",
    "MAX_ADVERT_CIRCUITS",
    "MAX_ENVELOPE",
    "MAX_FRAME",
    "MAX_INPUT_DATA",
    "MAX_SAMPLES",
    "NEGOTIATE",
    "PROFILE",
    "REACH",
    "RUNTIME_OF",
    "TRANSITIONS",
    "Ack",
    "AdvertBody",
    "BlobChunk",
    "BlobEnd",
    "BlobGet",
    "BlobMeta",
    "BlobMissing",
    "Busy",
    "Calibration",
    "Cancel",
    "CancelBody",
    "CapacityLevel",
    "CapacityResult",
    "CapacitySpec",
    "ChatMessage",
    "ClockGet",
    "ClockReply",
    "Commit",
    "ComputeUnit",
    "Conversation",
    "Decline",
    "DeclineReason",
    "DeviceProfile",
    "Dispatch",
    "Endpoint",
    "EndpointStatus",
    "EnergyFigures",
    "EnergyReading",
    "Envelope",
    "ErrorKind",
    "Failure",
    "FailureReason",
    "FleetDeal",
    "FrameDecoder",
    "GenerateSpec",
    "GenerationStats",
    "GpuInfo",
    "Holder",
    "InputData",
    "InputFed",
    "LevelEnd",
    "Load",
    "LocalProtocolError",
    "Measurement",
    "Message",
    "ModelFormat",
    "ModelRef",
    "NegotiateMessage",
    "NonceCache",
    "Offer",
    "OfferBody",
    "Phase",
    "ProfileFact",
    "ProfileGet",
    "ProfileName",
    "ProfileReply",
    "Progress",
    "Prompt",
    "ProtocolError",
    "ReachGet",
    "ReachReply",
    "Reachability",
    "Reclaim",
    "RecordError",
    "Release",
    "ReleaseBody",
    "RemoteProtocolError",
    "RequestRecord",
    "Result",
    "ResultBody",
    "Role",
    "Rouge",
    "RunConditions",
    "Runtime",
    "Slo",
    "Stage",
    "State",
    "Stats",
    "SustainSpec",
    "Sustained",
    "TaskSpec",
    "Telemetry",
    "TelemetryPoint",
    "ThrottleCause",
    "TokenizerPin",
    "UnitStatus",
    "Value",
    "Window",
    "capability_key",
    "control_characters",
    "decode",
    "derive",
    "encode",
    "field_problems",
    "for_csv",
    "for_html",
    "for_markdown",
    "for_rich",
    "frame",
    "open_envelope",
    "pack_body",
    "peer_id_from_public_key",
    "public_key_from_peer_id",
    "public_key_of",
    "seal",
    "unpack_body",
    "visible",
]
