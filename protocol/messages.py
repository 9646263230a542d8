"""Wire messages of every sark protocol: frozen values tagged by `kind`.

Protocols and the kinds they carry:

- `/sark/negotiate/1.0.0`: offer, commit, decline, dispatch, progress, result, failure, ack, cancel, reclaim,
  release
- `/sark/blob/1.0.0`: blob_get, blob_meta, blob_chunk, blob_end, blob_missing
- `/sark/profile/1.0.0`: profile_get, profile
- `/sark/reach/1.0.0`: reach_get, reach
- `/sark/challenge/1.2.0`: challenge_open, _ready, _ping, _pong, _chain_seed, _commit, _reveal, _rows,
  _failed; `1.1.0` the same opened with challenge_unit_open (`protocol.challenge`)
- any protocol: busy (the node refused the stream: too many in flight from this peer)

Signed payloads (offers, cancels, results, releases, adverts) travel as an `Envelope` whose payload is the
msgpack encoding of the body model; `protocol.records` seals and opens them.
"""

from __future__ import annotations

import enum
from typing import Annotated, Final, Literal

from pydantic import Field, TypeAdapter

from protocol.base import Value
from protocol.challenge import ChallengeFrame
from protocol.fleet import ClockGet, ClockReply
from protocol.framing import MAX_FRAME
from protocol.owner import OwnerStatement
from protocol.values import AdvertAddrs, AdvertCircuits, DeviceProfile, Load, Measurement, ModelRef, TaskSpec

NEGOTIATE: Final = "/sark/negotiate/1.0.0"
BLOB: Final = "/sark/blob/1.0.0"
PROFILE: Final = "/sark/profile/1.0.0"
REACH: Final = "/sark/reach/1.0.0"
KAD: Final = "/sark/kad/1.0.0"

# Signature domains: a signature made for one use never verifies for another.
DOMAIN_OFFER: Final = "sark/offer/v1"
DOMAIN_CANCEL: Final = "sark/cancel/v1"
DOMAIN_RESULT: Final = "sark/result/v1"
DOMAIN_ADVERT: Final = "sark/advert/v1"
DOMAIN_RELEASE: Final = "sark/release/v1"
DOMAIN_BUNDLE: Final = "sark/bundle/v1"

ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
TaskId = Annotated[str, Field(pattern=ID_PATTERN)]
LeaseId = Annotated[str, Field(pattern=ID_PATTERN)]
Detail = Annotated[str, Field(max_length=2000)]

MAX_ENVELOPE: Final = MAX_FRAME - (64 << 10)
"""Largest signed payload: the frame cap less room for the message around it, so that any envelope
(a result with `values.MAX_SAMPLES` samples included) travels in one frame."""


class DeclineReason(enum.StrEnum):
    """Why a worker will not take a task. A closed set: a worker never declines silently."""

    BUSY = "busy"
    QUEUE_FULL = "queue_full"
    UNSUPPORTED_UNIT = "unsupported_unit"
    NO_ENDPOINT = "no_endpoint"  # a gray-box task for a model no server declared here serves
    NOT_ENOUGH_MEMORY = "not_enough_memory"
    MODEL_TOO_LARGE = "model_too_large"
    FORMAT_NOT_ALLOWED = "format_not_allowed"
    POLICY = "policy"
    BAD_OFFER = "bad_offer"
    LIFETIME = "lifetime"  # the offer is valid for longer than this worker accepts (`max_offer_lifetime_s`)
    RELAYED = "relayed"
    SHUTTING_DOWN = "shutting_down"


class FailureReason(enum.StrEnum):
    """Why a committed task ended without a measurement."""

    UNIT_UNAVAILABLE = "unit_unavailable"
    FETCH = "fetch"
    URL_REFUSED = "url_refused"
    DIGEST_MISMATCH = "digest_mismatch"
    TOO_LARGE = "too_large"
    FORMAT = "format"
    LOAD = "load"
    INPUT = "input"
    FALLBACK = "fallback"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    CRASHED = "crashed"
    CANCELLED = "cancelled"
    UNKNOWN_LEASE = "unknown_lease"
    DISK = "disk"
    """The worker's disk (its model cache) is full: tried on another worker."""
    INTERNAL = "internal"
    SERVER = "server"  # the endpoint's server failed every request (its fault); the detail names its answers
    # The submitter's refusals of a signed result (`scheduler.verification.figures`): its figures
    # contradict its own samples (inconsistent), or its numbers cannot be a measurement (invalid: NaN,
    # negative, too long).
    INCONSISTENT = "inconsistent"
    INVALID = "invalid"


class Stage(enum.StrEnum):
    """Which step on the worker met the failure: the model's bytes were fetched, verified against the
    pinned digest, inspected (headers and signature, in the spawned child), loaded by the runtime, or run."""

    FETCH = "fetch"
    VERIFY = "verify"
    INSPECT = "inspect"
    LOAD = "load"
    RUN = "run"


class Phase(enum.StrEnum):
    """Where a committed task is on the worker."""

    QUEUED = "queued"
    FETCHING = "fetching"
    LOADING = "loading"
    WARMUP = "warmup"
    MEASURING = "measuring"


class Envelope(Value):
    """A payload signed by an Ed25519 key whose libp2p peer id is `peer_id`."""

    peer_id: str = Field(max_length=128)
    public_key: bytes = Field(min_length=32, max_length=32)
    payload: bytes = Field(max_length=MAX_ENVELOPE)
    signature: bytes = Field(min_length=64, max_length=64)


# -- signed bodies ---------------------------------------------------------------------------------


class Holder(Value):
    """A peer that holds (or is fetching) a model: a worker may fetch it there instead of the submitter."""

    peer_id: str = Field(max_length=128)
    addrs: tuple[str, ...] = Field(default=(), max_length=8)


class OfferBody(Value):
    """What a submitter signs when it offers a task to one worker."""

    campaign_id: TaskId
    task_id: TaskId
    submitter: str
    recipient: str
    nonce: bytes = Field(min_length=16, max_length=32)
    issued_at: float
    expires_at: float
    spec: TaskSpec
    model: ModelRef
    priority: int = Field(default=50, ge=0, le=100)
    submitter_addrs: tuple[str, ...] = ()
    holders: tuple[Holder, ...] = Field(default=(), max_length=16)


class CancelBody(Value):
    """What a submitter signs to cancel a task on one worker."""

    task_id: TaskId
    lease_id: LeaseId | None = None
    recipient: str
    nonce: bytes = Field(min_length=16, max_length=32)
    issued_at: float
    expires_at: float
    reason: Detail = ""


class ResultBody(Value):
    """What a worker signs when it reports a measurement."""

    campaign_id: TaskId
    task_id: TaskId
    lease_id: LeaseId
    worker: str
    submitter: str
    model_sha256: str
    device: DeviceProfile
    measurement: Measurement
    finished_at: float


class ReleaseBody(Value):
    """What a worker signs when it hands back a lease it will not finish (it is leaving the swarm)."""

    campaign_id: TaskId
    task_id: TaskId
    lease_id: LeaseId
    worker: str
    submitter: str
    issued_at: float
    reason: Detail = ""


class BundleSeal(Value):
    """What a submitter signs over a campaign's result bundle (`scheduler.results.bundle`): the digests
    of results.json and of the bundle's body, so that no byte of either changes unseen."""

    campaign_id: TaskId
    submitter: str
    results_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    body_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    rows: int = Field(ge=0)


class Reachability(enum.StrEnum):
    """How a worker can be reached: it decides this itself (a gate's dial-back) and says so in its advert."""

    DIRECT = "direct"
    RELAYED = "relayed"
    UNKNOWN = "unknown"


class AdvertBody(Value):
    """A worker's DHT advert: who it is, where to reach it, what it runs."""

    peer_id: str
    seq: int = Field(ge=0)
    issued_at: float
    expires_at: float
    addrs: AdvertAddrs = ()
    circuit_addrs: AdvertCircuits = ()
    reachability: Reachability = Reachability.UNKNOWN
    profile: DeviceProfile
    load: Load = Load()
    owner: OwnerStatement | None = None  # its owner's word that it is its device (`protocol.owner`)


# -- /sark/negotiate/1.0.0 -------------------------------------------------------------------------


class Offer(Value):
    kind: Literal["offer"] = "offer"
    task_id: TaskId
    envelope: Envelope


class Commit(Value):
    kind: Literal["commit"] = "commit"
    task_id: TaskId
    lease_id: LeaseId
    lease_ttl_s: float = Field(gt=0, le=3600)
    queue_position: int = Field(default=0, ge=0)


class Decline(Value):
    kind: Literal["decline"] = "decline"
    task_id: TaskId
    reason: DeclineReason
    detail: Detail = ""


class Dispatch(Value):
    kind: Literal["dispatch"] = "dispatch"
    task_id: TaskId
    lease_id: LeaseId


class Progress(Value):
    kind: Literal["progress"] = "progress"
    task_id: TaskId
    lease_id: LeaseId
    phase: Phase
    done: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)
    queue_position: int = Field(default=0, ge=0)
    median_ms: float | None = None


class Result(Value):
    kind: Literal["result"] = "result"
    task_id: TaskId
    lease_id: LeaseId
    envelope: Envelope


class Failure(Value):
    kind: Literal["failure"] = "failure"
    task_id: TaskId
    lease_id: LeaseId
    reason: FailureReason
    detail: Detail = ""
    stage: Stage | None = None


class Ack(Value):
    kind: Literal["ack"] = "ack"
    task_id: TaskId
    lease_id: LeaseId


class Cancel(Value):
    kind: Literal["cancel"] = "cancel"
    task_id: TaskId
    lease_id: LeaseId | None = None
    envelope: Envelope


class Reclaim(Value):
    """A submitter back from a crash asks for a lease it granted before: result, progress or failure."""

    kind: Literal["reclaim"] = "reclaim"
    task_id: TaskId
    lease_id: LeaseId


class Release(Value):
    """A worker hands back a lease it will not finish (it is leaving): the submitter offers the task
    elsewhere at once instead of waiting for the lease to lapse. Signed (`ReleaseBody`), final: no ack."""

    kind: Literal["release"] = "release"
    task_id: TaskId
    lease_id: LeaseId
    envelope: Envelope


# -- /sark/blob/1.0.0 ------------------------------------------------------------------------------


class BlobGet(Value):
    kind: Literal["blob_get"] = "blob_get"
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    offset: int = Field(default=0, ge=0)
    length: int | None = Field(default=None, ge=0)


class BlobMeta(Value):
    kind: Literal["blob_meta"] = "blob_meta"
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class BlobChunk(Value):
    kind: Literal["blob_chunk"] = "blob_chunk"
    offset: int = Field(ge=0)
    data: bytes = Field(max_length=4 << 20)


class BlobEnd(Value):
    kind: Literal["blob_end"] = "blob_end"


class BlobMissing(Value):
    kind: Literal["blob_missing"] = "blob_missing"
    sha256: str
    detail: Detail = ""


# -- /sark/profile/1.0.0 and /sark/reach/1.0.0 -----------------------------------------------------


class ProfileGet(Value):
    kind: Literal["profile_get"] = "profile_get"


class ProfileReply(Value):
    kind: Literal["profile"] = "profile"
    advert: Envelope
    load: Load


class ReachGet(Value):
    kind: Literal["reach_get"] = "reach_get"
    addrs: tuple[str, ...] = Field(default=(), max_length=16)


class ReachReply(Value):
    kind: Literal["reach"] = "reach"
    reachable: bool
    addr: str | None = None
    detail: Detail = ""


class Busy(Value):
    """The node refused this stream: too many in flight from this peer, or shutting down.

    `measuring`: a worker refusing a model upload because one of its own measurements runs; it will
    not serve until that ends, so the fetcher asks another holder (or the submitter) at once.
    """

    kind: Literal["busy"] = "busy"
    detail: Detail = ""
    measuring: bool = False


NegotiateMessage = (
    Offer | Commit | Decline | Dispatch | Progress | Result | Failure | Ack | Cancel | Reclaim | Release
)
Message = Annotated[
    Offer
    | Commit
    | Decline
    | Dispatch
    | Progress
    | Result
    | Failure
    | Ack
    | Cancel
    | Reclaim
    | Release
    | BlobGet
    | BlobMeta
    | BlobChunk
    | BlobEnd
    | BlobMissing
    | ProfileGet
    | ProfileReply
    | ReachGet
    | ReachReply
    | ClockGet
    | ClockReply
    | ChallengeFrame
    | Busy,
    Field(discriminator="kind"),
]

MESSAGE_ADAPTER: Final[TypeAdapter[Message]] = TypeAdapter(Message)
