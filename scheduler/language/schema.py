"""The campaign file's shape as pydantic models: the JSON Schema editors read for campaign.yaml.

`parse_campaign` reads a file by hand, block by block, so that every problem is named at the path the
user wrote; its values (`Campaign`, `Job`, `TaskSpec`) are what a file becomes, not what it says.
These models say what a file may say, in its own words: every field each block's parser accepts
(`tests/unit/scheduler/language/test_schema.py` pins the names against the parsers' own lists), the
short forms it takes (a name or a list, a number or a list of levels, `fleet: 4` or a mapping), the
bounds it checks (read from the values a file becomes, `TaskSpec`, `GenerateSpec` and the rest, and
from the parsers' constants: never written twice), and what each field is for. `campaign_schema` is
their JSON Schema (`sark-node schema campaign`); `scheduler.language.reference` renders it as the
campaign reference, docs/campaign.md. The blocks of a generative workload are
`scheduler.language.genschema`'s, and what every block shares `scheduler.language.blocks`'.

What the schema cannot say the parser still checks: the files a campaign names exist and fit their
caps, a job's `model:` is one of the campaign's keys, a sweep's values are valid for their field, a
sustained job's windows fit its duration. In two corners the schema is stricter than the parser (the
test pins both): a field whose value may be absent is left out, never `null`, though the parser takes
`threads: null` as absent; and a number that YAML reads as text (`1e3`, an exponent without a dot),
which the parser takes where pydantic converts it, is refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field

from protocol import MAX_PRICE_PER_HOUR, ComputeUnit, ModelFormat, SustainSpec, TaskSpec
from protocol.fleet import MAX_FLEET
from scheduler.language.blocks import URL_PATTERN, Block, like, one_of
from scheduler.language.genschema import EndpointBlock, FleetBlock, GenerateBlock
from scheduler.language.peaks import MAX_LARGEST
from scheduler.language.prices import MAX_PRICE_RULES
from scheduler.language.verify import MAX_REFERENCES, MAX_REPLICAS

SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
_PEER_ID: Final = r"^[A-Za-z0-9._-]{1,128}$"


class ModelBlock(Block):
    """A model the campaign measures: a local file sent to the workers, or a URL each worker fetches.
    Give `path` or `url`."""

    model_config = ConfigDict(json_schema_extra=one_of("path", "url"))

    path: str | None = Field(
        default=None,
        min_length=1,
        description="a local file, relative to the campaign file; sent to workers over /sark/blob",
    )
    url: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="an http(s) URL each worker fetches under its owner's URL policy (SSRF-guarded)",
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="pins the bytes; without it the submitter pins what it read or fetched",
    )
    key: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        description="the name a job's `model:` uses; default: the file name without its extension",
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        pattern=r"^[^/]+$",
        description="the model's file name, where the path or URL does not end in it",
    )
    format: ModelFormat | None = Field(
        default=None,
        description="the model's format; default: from the file's extension (a pickle is refused)",
    )


class RequireBlock(Block):
    """What a job demands of a device beyond its compute unit."""

    min_ram_gb: float = Field(
        default=0.0, ge=0, le=1e6, description="installed RAM at least this (GB); a large model raises it"
    )
    min_vram_gb: float = Field(default=0.0, ge=0, le=1e6, description="GPU memory at least this (GB)")
    os: Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] = Field(
        default=[], description="the device's OS is one of these (Linux, Darwin, ...; case-insensitive)"
    )
    peers: Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] = Field(
        default=[], description="only these peer ids"
    )


PeerId = Annotated[str, Field(pattern=_PEER_ID)]
PeerIds = Annotated[list[PeerId], Field(min_length=1, max_length=MAX_REFERENCES)]


class VerifyBlock(Block):
    """How a job's timings are checked against other peers' (docs/guide/verification.md). A job's
    block replaces the campaign's."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLICAS,
        description="each task on this many peers of one device class, of distinct owners and networks",
    )
    spot_check: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="instead of replicas: replicate a trusted peer's task with this probability",
    )
    unverified: Literal["refuse", "allow"] = Field(
        default="refuse", description="allow: place peers whose advertised claims were not believed"
    )
    same_host: Literal["refuse", "allow"] = Field(
        default="refuse",
        description='allow: replicas may share a network (a lab on one machine; rows say "(same host)")',
    )
    reference: PeerId | PeerIds | None = Field(
        default=None,
        description="your own devices (peer ids, or owner ids owner-...): one joins each quorum of its class",
    )
    reference_fallback: Literal["refuse", "allow"] = Field(
        default="refuse",
        description="allow: a class whose named reference is missing (offline, relayed, its task failed) "
        "is settled by the majority; refuse: it is Unverifiable, with why",
    )


class PriceBlock(Block):
    """What an hour of a device costs: one peer's, or a device class's. Give `peer` or `class`; the
    campaign's price wins over the owner's, a peer's over its class's."""

    model_config = ConfigDict(json_schema_extra=one_of("peer", "class"))

    peer: str | None = Field(default=None, pattern=_PEER_ID, description="a worker's peer id")
    device_class: str | None = Field(
        default=None,
        alias="class",
        pattern=r"^cls-[0-9a-f]{64}$",
        description="a device class's whole id (plan --json's class_ids; the 8-digit name is for display)",
    )
    per_hour: float = Field(ge=0, le=MAX_PRICE_PER_HOUR, description="the price of an hour of the device")


class RankBlock(Block):
    """What each swept length's devices or servers are ranked by: the best output tok/s among points
    within the latency bounds (at least one), or requests/s that met each job's `generate.slo`.
    Verified points rank above unchecked ones, failed verification never ranks (docs/guide/llm.md)."""

    by: Literal["throughput", "goodput"] = Field(
        default="throughput", description="throughput within the bounds, or goodput under each job's slo"
    )
    at: Literal["median", "p90", "p99"] = Field(default="median", description="the figure each bound reads")
    ttft_ms: float | None = Field(default=None, gt=0, description="time to first token at most this (ms)")
    tpot_ms: float | None = Field(default=None, gt=0, description="time per output token at most this (ms)")
    e2e_ms: float | None = Field(default=None, gt=0, description="the whole request at most this (ms)")
    max_error_pct: float | None = Field(
        default=None, ge=0, le=100, description="a point with more failed requests is not ranked (%)"
    )


class SustainBlock(Block):
    """A sustained run: one process times runs back to back for `duration_s`, a median per window."""

    duration_s: float = like(SustainSpec, "duration_s", "how long runs are timed (s)")
    window_s: float = like(SustainSpec, "window_s", "each window's length (s)")


PeakName = Literal["fp32", "tf32", "fp16", "bf16", "int8", "fp8"]
Access = Literal["read", "write", "copy"]


class PeaksBlock(Block):
    """The unit's peaks instead of a model: one task per figure, each a size sweep to the plateau in
    one measuring child (docs/guide/peaks.md). A CPU unit's kernels, or GPU (PyTorch)'s first CUDA
    device's."""

    precisions: PeakName | list[PeakName] | None = Field(
        default=None, description="matmul precisions; default: every one the unit has a kernel for"
    )
    memory: bool | Access | list[Access] = Field(
        default=True, description="memory bandwidths (read, write, copy); true: all three, false: none"
    )
    largest_n: int | None = Field(
        default=None, ge=1, le=MAX_LARGEST, description="the largest matmul n swept; default: to the plateau"
    )
    largest_mib: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LARGEST,
        description="the largest memory array swept (MiB); default: to the plateau",
    )


InputFile = Annotated[str, Field(pattern=r"\.npy$")]


class JobBlock(Block):
    """A job: what to measure on which compute unit, how often, on which devices. Give `compute_unit`
    (a model) or `endpoint` (a model server)."""

    model_config = ConfigDict(json_schema_extra=one_of("compute_unit", "endpoint"))

    compute_unit: ComputeUnit | None = Field(default=None, description="the runtime and processor")
    model: str | None = Field(
        default=None, description="the key of one of the campaign's models; default: every model"
    )
    num_inference_runs: int = like(TaskSpec, "runs", "timed runs per process (with ci_target_pct: the least)")
    warmup_runs: int = like(TaskSpec, "warmups", "untimed runs first (a generate job: 1)")
    warmup_until_stable: bool = like(TaskSpec, "warmup_until_stable", "warm up until the times settle")
    load_runs: int = like(TaskSpec, "load_runs", "fresh loads timed (a generate job: 2)")
    processes: int | None = like(
        TaskSpec, "processes", "fresh child processes per task; default: the campaign's", default=None
    )
    timeout_s: float = like(TaskSpec, "timeout_s", "a task's time limit (s; a sustained job: duration + 600)")
    threads: int | None = like(TaskSpec, "threads", "the runtime's threads; default: the runtime's own")
    memory_limit_mb: int | None = like(TaskSpec, "memory_limit_mb", "the measuring child's memory cap (MB)")
    input_shapes: dict[str, list[Annotated[int, Field(ge=1)]]] = Field(
        default={}, description="a shape for each input with dynamic dimensions"
    )
    input_values: dict[str, float] = Field(
        default={}, description="a constant that fills every element of the named input"
    )
    input_data: (
        Annotated[str, Field(pattern=r"\.npz$")] | Annotated[dict[str, InputFile], Field(min_length=1)] | None
    ) = Field(default=None, description="the campaign's own arrays: one .npz, or an .npy per input name")
    strict_placement: bool = like(
        TaskSpec, "strict_placement", "a fallback off the asked unit fails the task"
    )
    precision: Literal["f32", "bf16", "f16"] | None = like(
        TaskSpec, "precision", "the precision OpenVINO computes in; default: f32 on its CPU"
    )
    dynamic_shapes: bool = like(
        TaskSpec, "dynamic_shapes", "compile OpenVINO for dynamic inputs, not the shapes fed"
    )
    performance_hint: Literal["latency", "throughput"] = like(
        TaskSpec, "performance_hint", "OpenVINO's performance hint: latency (default) or throughput"
    )
    placement_share: float = like(TaskSpec, "placement_share", "the least share of nodes on the asked unit")
    ci_target_pct: float | None = like(
        TaskSpec, "ci_target_pct", "run on until the median's 95% interval is within this (%)"
    )
    max_runs: int | None = like(TaskSpec, "max_runs", "the stopping rule's most runs (default: 10 x runs)")
    max_duration_s: float | None = like(TaskSpec, "max_duration_s", "the stopping rule's most time (s)")
    devices: Literal["all", "any"] | Annotated[int, Field(ge=1, le=10_000)] = Field(
        default="all", description="every feasible peer (a task each), any one, or this many distinct peers"
    )
    require: RequireBlock = Field(default_factory=RequireBlock, description="what the device must have")
    sweep: Annotated[dict[str, Annotated[list[Any], Field(min_length=1)]], Field(min_length=1)] | None = (
        Field(default=None, description="job fields and their values: one job per combination, in file order")
    )
    generate: GenerateBlock | None = Field(
        default=None, description="a generative workload instead of tensors"
    )
    quality: Literal["rouge"] | list[Literal["rouge"]] = Field(
        default=[], description="quality metrics of a generate job: ROUGE-1/2/L F1 against references"
    )
    endpoint: EndpointBlock | None = Field(default=None, description="a model server instead of a model")
    fleet: Annotated[int, Field(ge=1, le=MAX_FLEET)] | Literal["all"] | FleetBlock | None = Field(
        default=None, description="N workers drive one server together on the submitter's clock"
    )
    sustain: SustainBlock | None = Field(default=None, description="time runs for a duration, per window")
    peaks: PeaksBlock | None = Field(default=None, description="the unit's peak figures instead of a model")
    verify: VerifyBlock | None = Field(
        default=None, description="this job's verification; default: the campaign's"
    )


class CampaignFile(Block):
    """A campaign file (campaign.yaml), or the seeds' JSON body. Give at most one of `model`, `models`
    and `model_url`; a campaign whose jobs all measure model servers or peaks needs none."""

    model_config = ConfigDict(
        title="sark-node campaign",
        json_schema_extra={
            "not": {
                "anyOf": [
                    {"required": ["model", "models"]},
                    {"required": ["model", "model_url"]},
                    {"required": ["models", "model_url"]},
                ]
            }
        },
    )

    name: str = Field(default="", max_length=200, description="default: the first model's key")
    priority: int = Field(
        default=50, ge=0, le=100, description="a worker's queue runs higher priorities first"
    )
    processes: int = Field(
        default=3, ge=1, le=20, description="fresh child processes per task; the median of their medians"
    )
    max_inflight: int = Field(
        default=0, ge=0, le=100_000, description="tasks offered or running at once in the swarm (0: no limit)"
    )
    model: ModelBlock | None = Field(default=None, description="the one model")
    models: Annotated[list[ModelBlock], Field(min_length=1)] | None = Field(
        default=None, description="several models; each job runs on every model unless it names one"
    )
    model_url: str | None = Field(
        default=None, pattern=URL_PATTERN, description="the seeds' form: one model by URL"
    )
    jobs: Annotated[list[JobBlock], Field(min_length=1)] = Field(description="what to measure")
    verify: VerifyBlock = Field(
        default_factory=VerifyBlock, description="how every job's timings are verified"
    )
    prices: Annotated[list[PriceBlock], Field(max_length=MAX_PRICE_RULES)] = Field(
        default=[], description="prices per hour, per peer or device class"
    )
    rank: RankBlock | None = Field(
        default=None, description="rank each swept length's devices or servers (their fronts) by this"
    )


def _plain(node: Any, field: bool = False) -> Any:
    """The schema as a file reads it: `null` taken out of every field (an optional field is one left
    out), no field titles (pydantic's "Max Runs" says nothing its name does not), each description
    on one line."""
    if isinstance(node, list):
        return [_plain(item, field) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if field and key == "title":
            continue
        fields = key == "properties"
        out[key] = {name: _plain(sub, field=True) for name, sub in value.items()} if fields else _plain(value)
    description = out.get("description")
    if isinstance(description, str):
        out["description"] = " ".join(description.split())
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        kept = [option for option in options if option != {"type": "null"}]
        del out["anyOf"]
        out |= kept[0] if len(kept) == 1 else {"anyOf": kept}
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def campaign_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a campaign file, as `sark-node schema campaign` prints it."""
    schema = _plain(CampaignFile.model_json_schema(by_alias=True))
    swept = [name for name in JobBlock.model_fields if name != "sweep"]
    schema["$defs"]["JobBlock"]["properties"]["sweep"]["propertyNames"] = {"enum": swept}
    return {"$schema": SCHEMA_DIALECT, **schema}


__all__ = ["SCHEMA_DIALECT", "CampaignFile", "JobBlock", "campaign_schema"]
