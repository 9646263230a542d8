"""Generative workloads on the wire: what to generate, and what each request and the whole run measured.

A generate task either runs a model on the worker (white-box) or drives a model server over its
OpenAI-compatible API (gray-box: a server the worker's owner declared; black-box: a URL the campaign
gives). All three produce the same per-request records and the same aggregate, so one report reads
them all. Every aggregate states its formula beside its number (`FORMULAS`), because tools disagree
on what "time per output token" means.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from protocol.base import SHA256_PATTERN, Stats, Value
from protocol.fleet import MAX_FLEET, FleetDeal

MAX_PROMPTS: Final = 2_000
MAX_PROMPT_CHARS: Final = 32_000
MAX_RECORDS: Final = 5_000

FORMULAS: Final[dict[str, str]] = {
    "ttft_ms": "time from sending the request to the first output token, per request",
    "tpot_ms": "(e2e_ms - ttft_ms) / (output_tokens - 1), per request with at least 2 output tokens",
    "itl_ms": "every gap between consecutive output tokens, pooled over all requests",
    "e2e_ms": "time from sending the request to the last output token, per request",
    "prefill_tok_per_s": "median over requests of prompt_tokens / ttft_s",
    "decode_tok_per_s": "median over requests of (output_tokens - 1) / (e2e_s - ttft_s)",
    "output_tok_per_s": "sum of output_tokens over all successful requests / wall time of the run",
    "request_per_s": "successful requests / wall time of the run",
    "goodput": "share of all requests that succeeded and met every SLO",
    "rouge": "ROUGE-1/2/L F1 of each output against its reference, averaged over requests with one",
}


class Prompt(Value):
    """One prompt of a generate workload, with an optional reference output for quality scores."""

    id: str = Field(min_length=1, max_length=128)
    text: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    reference: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)


class Slo(Value):
    """Service-level objectives: a request counts towards goodput only if it meets every one set."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class Endpoint(Value):
    """A model server to measure instead of a model file.

    Gray-box: `url` is None and the worker uses the server its owner declared for `model`.
    Black-box: `url` is the campaign's. The campaign names only `api_key_env`, the submitter's
    environment variable; the submitter puts its value in `api_key` of the one offer to the chosen
    worker (signed, on a Noise-encrypted stream), and nothing else ever holds it.
    """

    model: str = Field(min_length=1, max_length=256)
    url: str | None = Field(default=None, max_length=2048)
    api_key_env: str | None = Field(default=None, max_length=128)
    api_key: str | None = Field(default=None, max_length=4096, repr=False)


class GenerateSpec(Value):
    """What a generate task asks for: prompts, lengths, load shape, quality metrics."""

    prompts: tuple[Prompt, ...] = Field(min_length=1, max_length=MAX_PROMPTS)
    prompts_source: str = Field(default="", max_length=512)  # "builtin:summaries" or a file name
    prompts_sha256: str = Field(pattern=SHA256_PATTERN)
    max_new_tokens: int = Field(default=64, ge=1, le=32_768)
    ignore_eos: bool = False
    chat: bool = True
    concurrency: int = Field(default=1, ge=1, le=1024)
    request_rate: float | None = Field(default=None, gt=0)  # Poisson arrivals (open loop) when set
    duration_s: float | None = Field(default=None, gt=0, le=86_400)
    quality: tuple[Literal["rouge"], ...] = ()
    slo: Slo = Slo()
    endpoint: Endpoint | None = None
    # fleet load (protocol.fleet): members asked for (0: every feasible worker), the schedule's seed,
    # and in the offer to one member only, its deal of the shared schedule
    fleet_size: int | None = Field(default=None, ge=0, le=MAX_FLEET)
    fleet_seed: int | None = Field(default=None, ge=0, lt=2**63)  # None: the submitter draws one
    deal: FleetDeal | None = None


ErrorKind = Literal[
    "connect",
    "http_status",
    "rate_limited",
    "server_error",
    "not_sse",
    "stream_error",
    "deadline",
    "internal",
]


class RequestRecord(Value):
    """One request as it happened. Times are milliseconds since the request was sent (monotonic clock)."""

    prompt_id: str = Field(max_length=128)
    prompt_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    ttft_ms: float | None = Field(default=None, ge=0)
    e2e_ms: float = Field(ge=0)
    token_times_ms: tuple[float, ...] = ()
    output_text: str = Field(default="", max_length=200_000)
    # True: the worker dropped this text so that the result fits one envelope (`node.worker.fit`);
    # ROUGE then scores only the requests that kept theirs.
    text_dropped: bool = False
    tokens_counted: bool = False  # True: counted by us, not reported by the server's usage chunk
    started_s: float = Field(default=0.0, ge=0)  # when it was sent, seconds since the run began
    error: ErrorKind | None = None
    error_detail: str = Field(default="", max_length=2000)
    planned_s: float | None = Field(default=None, ge=0)  # fleet load: when it was due, as started_s


class Rouge(Value):
    """ROUGE F1 scores (0..1), averaged over the requests that had a reference."""

    rouge1: float = Field(ge=0, le=1)
    rouge2: float = Field(ge=0, le=1)
    rouge_l: float = Field(ge=0, le=1)
    scored: int = Field(ge=0)


class GenerationStats(Value):
    """The aggregate of one generate run, each figure computed as `FORMULAS` states."""

    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    wall_s: float = Field(ge=0)
    concurrency: int = Field(default=1, ge=1)
    request_rate: float | None = None
    ttft_ms: Stats
    tpot_ms: Stats
    itl_ms: Stats
    e2e_ms: Stats
    prompt_tokens_mean: float = Field(ge=0)
    output_tokens_mean: float = Field(ge=0)
    prefill_tok_per_s: float = Field(ge=0)
    decode_tok_per_s: float = Field(ge=0)
    output_tok_per_s: float = Field(ge=0)
    request_per_s: float = Field(ge=0)
    goodput: float | None = Field(default=None, ge=0, le=1)
    tokens_counted: bool = False
    rouge: Rouge | None = None
    rtt_ms: float | None = Field(default=None, ge=0)  # endpoint only: TCP connect time (median)
    tls_ms: float | None = Field(default=None, ge=0)  # endpoint only, https: TLS handshake (median)
    client_overhead_ms: float | None = Field(default=None, ge=0)
    client_cpu_pct: float | None = Field(default=None, ge=0)  # endpoint: the client's CPU over the run
    formulas: dict[str, str] = Field(default_factory=lambda: dict(FORMULAS))
    records: tuple[RequestRecord, ...] = Field(default=(), max_length=MAX_RECORDS)
