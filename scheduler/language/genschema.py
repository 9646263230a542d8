"""The campaign file's generate blocks as models: a generative workload, and the load on a model server.

A job's `generate:` block (prompts or a dataset, lengths, the load's levels, an SLO, a capacity search),
its `endpoint:` and its `fleet:`, in the file's own words: the shapes `scheduler.language.generate`,
`datablock`, `endpoints`, `capacity` and `fleet` parse, their bounds read from `GenerateSpec`,
`CapacitySpec`, `Slo` and `Endpoint`. `scheduler.language.schema` puts them in a job.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field

from protocol import CapacitySpec, Endpoint, GenerateSpec, Slo
from protocol.capacity import MAX_LEVELS
from protocol.fleet import MAX_FLEET
from protocol.generation import MAX_TURNS
from scheduler.language.blocks import URL_PATTERN, Block, like, one_of
from scheduler.language.dataset import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from scheduler.language.prompts import BUILTIN_PREFIX, BUILTIN_SETS

_BUILTIN: Final = ", ".join(BUILTIN_PREFIX + name for name in BUILTIN_SETS)


class SloBlock(Block):
    """Service-level objectives: a request counts towards goodput only if it meets every one given."""

    ttft_ms: float | None = like(Slo, "ttft_ms", "time to first token at most this (ms)")
    tpot_ms: float | None = like(Slo, "tpot_ms", "time per output token at most this (ms)")
    e2e_ms: float | None = like(Slo, "e2e_ms", "the whole request at most this (ms)")


class RateRange(Block):
    """The request rates a capacity search tries: from `min`, doubling, up to `max` (req/s)."""

    min: float = Field(gt=0, description="the first rate tried (req/s)")
    max: float = Field(gt=0, description="the highest rate tried (req/s)")


class CapacityBlock(Block):
    """A search for the highest load whose goodput stays at `goodput_pct`, from each vantage point.
    Give `max_concurrency` (closed loop) or `rate` (open loop), and an SLO here or in `generate.slo`."""

    model_config = ConfigDict(json_schema_extra=one_of("max_concurrency", "rate"))

    slo: SloBlock | None = Field(default=None, description="the SLO goodput counts against")
    goodput_pct: float = like(CapacitySpec, "goodput_pct", "the share of requests that must meet the SLO (%)")
    max_concurrency: int | None = like(
        CapacitySpec, "max_concurrency", "concurrency levels 1, 2, 4, ... up to this, then bisected"
    )
    rate: RateRange | None = Field(default=None, description="request rates instead of concurrency levels")
    level_s: float = like(CapacitySpec, "level_s", "each level's duration (s)")
    level_requests: int | None = like(CapacitySpec, "level_requests", "each level's requests at most this")
    max_error_pct: float = like(CapacitySpec, "max_error_pct", "a level with more failed requests ends (%)")
    rate_resolution_pct: float = like(
        CapacitySpec, "rate_resolution_pct", "a rate search bisects until within this (%)"
    )


class Lengths(Block):
    """Token lengths drawn from a normal distribution, kept within two standard deviations."""

    mean: int = Field(ge=1, description="the mean length (tokens)")
    stddev: float = Field(default=0, ge=0, description="the standard deviation (tokens)")


class InputLengths(Lengths):
    """Prompt lengths in tokens, drawn from a normal distribution within two standard deviations."""

    mean: int = Field(ge=1, le=MAX_INPUT_TOKENS, description="the mean length (tokens)")


class OutputLengths(Lengths):
    """Answer lengths in tokens (each request's `max_tokens`), drawn from a normal distribution."""

    mean: int = Field(ge=1, le=MAX_OUTPUT_TOKENS, description="the mean length (tokens)")


class RandomBlock(Block):
    """Random prompts of exact token lengths under the pinned tokenizer (`generate.tokenizer`)."""

    input_tokens: InputLengths = Field(description="the prompts' lengths")
    output_tokens: OutputLengths = Field(description="the answers' lengths asked")
    seed: int = Field(default=0, ge=0, lt=2**63, description="the same seed and tokenizer: the same bytes")


class DatasetBlock(Block):
    """Prompts made from a dataset instead of `prompts:`. Give one of `random` or `sharegpt`, and
    `turns` to replay each conversation as a session (the first turn alone by default)."""

    model_config = ConfigDict(json_schema_extra=one_of("random", "sharegpt"))

    random: RandomBlock | None = Field(default=None, description="random prompts of exact token lengths")
    sharegpt: str | None = Field(
        default=None,
        min_length=1,
        description="a ShareGPT or OpenAI-messages file (JSON or JSONL): each conversation's first human "
        "turn, its answer the reference",
    )
    turns: Annotated[int, Field(ge=1, le=MAX_TURNS)] | Literal["all"] = Field(
        default=1,
        description="turns replayed per session, each carrying the earlier ones with the server's answers "
        "(1: the first turn alone; all: every turn of a ShareGPT file; random: each prompt's turns)",
    )


class SweepBlock(Block):
    """Lengths swept over a random dataset: one job per combination and load level (the report draws
    each device's or server's throughput-latency front at each combination)."""

    input_tokens: list[Annotated[int, Field(ge=1, le=MAX_INPUT_TOKENS)]] | None = Field(
        default=None, min_length=1, description="the random dataset's mean prompt lengths (tokens)"
    )
    output_tokens: list[Annotated[int, Field(ge=1, le=MAX_OUTPUT_TOKENS)]] | None = Field(
        default=None, min_length=1, description="the random dataset's mean answer lengths (tokens)"
    )


Levels = Annotated[list[Annotated[int, Field(ge=1, le=1024)]], Field(min_length=1, max_length=MAX_LEVELS)]
Rates = Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1, max_length=MAX_LEVELS)]


class GenerateBlock(Block):
    """A generative workload: an LLM measured on the worker (white-box), or a model server under
    load (an `endpoint:` job)."""

    prompts: str | None = Field(
        default=None,
        min_length=1,
        description=f"a JSONL file of prompt, reference, id lines, or {_BUILTIN}; or give a dataset",
    )
    dataset: DatasetBlock | None = Field(default=None, description="prompts made from a dataset")
    tokenizer: str | None = Field(
        default=None,
        min_length=1,
        description="a tokenizer.json or its folder, pinned by sha256: counts tokens, builds datasets",
    )
    num_prompts: int | None = Field(
        default=None, ge=1, description="take, or cycle to, this many prompts (random: 100 by default)"
    )
    max_new_tokens: int = like(GenerateSpec, "max_new_tokens", "the most tokens each answer may have")
    ignore_eos: bool = like(GenerateSpec, "ignore_eos", "always generate max_new_tokens (vLLM, SGLang)")
    chat: bool = like(GenerateSpec, "chat", "apply the chat template (false: /v1/completions, text as is)")
    concurrency: Annotated[int, Field(ge=1, le=1024)] | Levels = Field(
        default=1, description="requests in flight (closed loop); a list: one job per level"
    )
    request_rate: Annotated[float, Field(gt=0)] | Rates | None = Field(
        default=None, description="Poisson arrivals (open loop, req/s); a list: one job per rate"
    )
    duration_s: float | None = like(GenerateSpec, "duration_s", "send for this long, cycling the prompts (s)")
    sweep: SweepBlock | None = Field(
        default=None,
        description="sweep input and output lengths (a random dataset): one job per point and level",
    )
    think_time_s: float = like(
        GenerateSpec, "think_time_s", "sessions: the wait between a turn's answer and the next turn (s)"
    )
    slo: SloBlock | None = Field(default=None, description="the SLO goodput counts against")
    capacity: CapacityBlock | None = Field(
        default=None, description="search the highest load meeting the SLO instead of one load"
    )


class EndpointBlock(Block):
    """A model server (OpenAI-compatible, streamed) measured instead of a model file."""

    model: str = like(Endpoint, "model", "the model id the server lists")
    url: str | None = Field(
        default=None,
        max_length=2048,
        pattern=URL_PATTERN,
        description="black-box: the server's URL; left out (gray-box): a server a worker's owner declared",
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="the submitter's environment variable holding the key (never the key itself)",
    )
    metrics_url: str | None = Field(
        default=None,
        max_length=2048,
        pattern=URL_PATTERN,
        description="the server's Prometheus metrics, read by the submitter alone: no result may claim "
        "more requests or tokens than its counters rose by (black-box only)",
    )


class FleetBlock(Block):
    """Fleet load's long form: its members and the schedule's seed."""

    workers: Annotated[int, Field(ge=1, le=MAX_FLEET)] | Literal["all"] = Field(
        description="how many workers drive the server together, or all"
    )
    seed: int | None = Field(default=None, ge=0, lt=2**63, description="the schedule's seed (default: drawn)")


__all__ = ["EndpointBlock", "FleetBlock", "GenerateBlock"]
