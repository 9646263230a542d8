"""Pure wire protocol of sark-node: no networking, no clock, no randomness.

Modules:
    units     compute units, runtimes, DHT capability keys
    base      the frozen Value base (with its checked `with_`), summary Stats, pydantic errors by field
    values    domain values: device profile, model reference, task spec, measurement
    generation  generate workloads (LLMs, model servers): spec, per-request records, aggregates
    tokenizer   a pinned tokenizer.json: pin (name, sha256, compressed bytes), unpack, Pinned (encode),
                shared by the submitter's datasets and the worker's token counts
    challenge the challenge's frames (`/sark/challenge/1.2.0` CPU, `1.1.0` a GPU): a drawn chain of
              products, committed rows
    fleet     fleet load: one member's deal of a shared schedule, the clock probe messages
    arrivals  the one seeded arrival generator (SplitMix64, Poisson send times) of open-loop load
    telemetry live device telemetry of a timed phase, sustained-run spec, windows and throttle causes
    windows   windows over time from samples, marks and telemetry; a sustained run's throttling verdict
    stats     summary statistics of a sample, process spread, the stability verdict
    genstats  a generate run's aggregate from its records, as FORMULAS says
    sessions  a session run's figures: TTFT by turn index, each session's duration, turns and tokens
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
    owner     owner statements: an owner's key vouching that a peer id is its device (one owner, one vote)
    errors    ProtocolError, LocalProtocolError, RemoteProtocolError, RecordError
    text      one seam per medium for peer- and campaign-written text (visible, for_rich, for_csv, ...)

Frames
------

Frozen pydantic values with `extra="forbid"`, tagged by `kind`, msgpack, a varint length prefix, a 4 MiB
frame cap checked before allocating; a decode failure resets that stream only.

Offers
------

Offers: `expires_at - issued_at` is at most `max_offer_lifetime_s` (NodeConfig, 600 s; the submitter signs
300 s), refused as `DeclineReason.LIFETIME` before the nonce is remembered (cancels: ignored). The replay
guard (`protocol.records.NonceCache`) is partitioned by signer: 100,000 nonces in all, a tenth per signer; a
signer at its share is declined `busy`, others still commit. With an allowlist of at most ten submitters
nobody can be locked out; in open mode ten identities can still fill it (fails closed: a nonce is never
forgotten before its record expires).

Result size
-----------

Result size: `MAX_ENVELOPE` (a signed payload) is the 4 MiB frame cap less 64 KiB (it was 1 MiB, and a
result of more than ~116,000 samples made the worker's `seal` raise). A task asks for at most `MAX_SAMPLES`
= 262,144 timed runs (the codec's array cap; runs x processes and max_runs x processes are validated, the
stopping rule stops there); at 9 msgpack bytes a float that is 2.25 MiB, so a tensor result always travels
whole in one frame (`tests/labs/e2e/test_big_result.py`: 4 x 65,536 runs end to end). A generate result can
be far larger (2,000 requests x 32,768 token times), so `node/worker/fit.py` cuts, only while it does not
fit: output texts past the wire's 64 KiB string cap (always; ROUGE scores the shortened text), error details
(to 200 characters; no figure reads them), the texts no figure scores, token times (kept whole in 1 request
in k, the others' emptied: ITL pools true gaps between tokens of the requests that kept them; thinning each
request's times to 1 in k would make every gap span k tokens), then the scored texts (kept in 1 request in
k, the others marked `RequestRecord.text_dropped`: ROUGE averages the kept ones, and is absent when none is
kept). Every request, count and end-to-end time stays, so `process_runs` and the samples still fit the task;
a tensor result is never cut (it always fits). Each cut is declared in `Measurement.trimmed` and the CSV's
`Trimmed`, naming the figure it narrows. The rule: every figure a result shows is derived from the records
it carries, so after cutting the worker derives every figure again (`protocol.derive`) from what it kept,
and the submitter's check (`scheduler.verification`, "Figures derived again, readings bounded") accepts it;
one that still cannot fit fails `too_large`.

Untrusted text
--------------

A device name, a profile fact, a unit's reason, a failure detail, an input's name or a campaign's name is
data in every medium. `protocol/text.py` (pure) holds one seam per medium, applied where the text leaves:
`for_csv` on every cell in `scheduler.to_csv` (results.csv, the seeds' flat copy that `serve` writes,
`results`, `report --format csv`, every CSV the HTTP API serves: a non-numeric cell starting with `=`, `+`,
`-`, `@`, tab or CR gets a leading `'`, control characters become `\\x1b`-style escapes); `for_rich` for
every rich table cell or markup string that carries such text (`submit`'s live view, latency matrix,
generation table, failure lines; `plan`, `status`, `peers`, diffs: markup and emoji codes such as `:skull:`
are shown as typed, never applied: rich has no escape for emoji codes, so the text is cut with empty
`[none][/none]` spans, which render nothing); `visible` for plain lines (`fail`'s one-line errors) and
figure labels; `for_markdown` in `report --format md` (`node/report/tables.py`); `for_html` in report.html
(`render`, `genreport`, `endreport`; figures drawn with mathtext off, so a `$` stays text). results.json
stays faithful (`json.dumps` escapes control characters); the dashboard sets `textContent` only. At the
edge, a profile's names and facts (`protocol.values.ProfileName`, `ProfileFact`: device name, SoC, OS and
version, arch, GPU, runtimes, endpoint names) are printable and bounded (128/256 characters): `join` exits 2
naming the field, the worker re-checks the profile it advertises (`node/worker/role.checked`), and a peer's
advert that breaks them is invalid like a badly signed one. Free text (reasons, details) is not checked at
the edge: the seams neutralise it. Pinned by `tests/unit/protocol/test_text.py`,
`tests/unit/node/report/test_output_seams.py`, `tests/labs/cli/test_profile_checks.py`,
`tests/labs/views/test_hostile_csv.py` (both CSV routes of the API) and
`tests/labs/e2e/test_hostile_text.py` (real processes).
"""

from __future__ import annotations

from protocol.aggregate import derive
from protocol.base import Stats, Value, field_problems
from protocol.capacity import CapacityLevel, CapacityResult, LevelEnd
from protocol.challenge import (
    CHAIN_MAX_N,
    CHAIN_MAX_STEPS,
    CHALLENGE,
    CHALLENGE_BUSY,
    CHALLENGE_MAX_ROWS,
    CHALLENGE_MIN_N,
    CHALLENGE_PINGS,
    CHALLENGE_PREEMPTED,
    CHALLENGE_ROUNDS,
    CHALLENGE_UNITS,
    CHALLENGE_WIDTH,
    CPU_CHAIN_N,
    DIGEST_BYTES,
    ChallengeChainSeed,
    ChallengeCommit,
    ChallengeFailed,
    ChallengeOpen,
    ChallengePing,
    ChallengePong,
    ChallengeReady,
    ChallengeReveal,
    ChallengeRows,
    ChallengeUnitOpen,
)
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
    RuntimeRates,
    SessionStats,
    Slo,
    TokenizerPin,
    TurnStats,
)
from protocol.machine import TRANSITIONS, Conversation, Role, State
from protocol.messages import (
    BLOB,
    DOMAIN_ADVERT,
    DOMAIN_BUNDLE,
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
    BundleSeal,
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
from protocol.owner import (
    Owner,
    OwnerStatement,
    owner_id,
    owner_of,
    owner_public_key,
    short_owner,
    sign_owner,
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
    BANDWIDTHS,
    GPU_PEAK_BATCH,
    MATMUL_PRECISIONS,
    MAX_ADVERT_ADDRS,
    MAX_ADVERT_CIRCUITS,
    MAX_INPUT_DATA,
    MAX_PRICE_PER_HOUR,
    MAX_SAMPLES,
    PEAK_MIN_REPEATS,
    AsyncRun,
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
    Peak,
    PeakRun,
    PeakSpec,
    ProfileFact,
    ProfileName,
    RunConditions,
    TaskSpec,
    UnitStatus,
)

__all__ = [
    "ANY_WORKER_KEY",
    "BANDWIDTHS",
    "BLOB",
    "CHAIN_MAX_N",
    "CHAIN_MAX_STEPS",
    "CHALLENGE",
    "CHALLENGE_BUSY",
    "CHALLENGE_MAX_ROWS",
    "CHALLENGE_MIN_N",
    "CHALLENGE_PINGS",
    "CHALLENGE_PREEMPTED",
    "CHALLENGE_ROUNDS",
    "CHALLENGE_UNITS",
    "CHALLENGE_WIDTH",
    "CLOCK",
    "CPU_CHAIN_N",
    "DIGEST_BYTES",
    "DOMAIN_ADVERT",
    "DOMAIN_BUNDLE",
    "DOMAIN_CANCEL",
    "DOMAIN_OFFER",
    "DOMAIN_RELEASE",
    "DOMAIN_RESULT",
    "FORMULAS",
    "GPU_PEAK_BATCH",
    "GPU_UNITS",
    "KAD",
    "MATMUL_PRECISIONS",
    "MAX_ADVERT_ADDRS",
    "MAX_ADVERT_CIRCUITS",
    "MAX_ENVELOPE",
    "MAX_FRAME",
    "MAX_INPUT_DATA",
    "MAX_PRICE_PER_HOUR",
    "MAX_SAMPLES",
    "NEGOTIATE",
    "PEAK_MIN_REPEATS",
    "PROFILE",
    "REACH",
    "RUNTIME_OF",
    "TRANSITIONS",
    "Ack",
    "AdvertBody",
    "AsyncRun",
    "BlobChunk",
    "BlobEnd",
    "BlobGet",
    "BlobMeta",
    "BlobMissing",
    "BundleSeal",
    "Busy",
    "Calibration",
    "Cancel",
    "CancelBody",
    "CapacityLevel",
    "CapacityResult",
    "CapacitySpec",
    "ChallengeChainSeed",
    "ChallengeCommit",
    "ChallengeFailed",
    "ChallengeOpen",
    "ChallengePing",
    "ChallengePong",
    "ChallengeReady",
    "ChallengeReveal",
    "ChallengeRows",
    "ChallengeUnitOpen",
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
    "Owner",
    "OwnerStatement",
    "Peak",
    "PeakRun",
    "PeakSpec",
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
    "RuntimeRates",
    "SessionStats",
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
    "TurnStats",
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
    "owner_id",
    "owner_of",
    "owner_public_key",
    "pack_body",
    "peer_id_from_public_key",
    "public_key_from_peer_id",
    "public_key_of",
    "seal",
    "short_owner",
    "sign_owner",
    "unpack_body",
    "visible",
]
