"""Generative workloads on the wire: what to generate, and what each request and the whole run measured.

A generate task either runs a model on the worker (white-box) or drives a model server over its
OpenAI-compatible API (gray-box: a server the worker's owner declared; black-box: a URL the campaign
gives). All three produce the same per-request records and the same aggregate, so one report reads
them all. Every aggregate states its formula beside its number (`FORMULAS`), because tools disagree
on what "time per output token" means.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from protocol.base import SHA256_PATTERN, Stats, Value
from protocol.fleet import MAX_FLEET, FleetDeal

MAX_PROMPTS: Final = 2_000
MAX_PROMPT_CHARS: Final = 32_000
MAX_RECORDS: Final = 5_000
MAX_ATTEMPTS: Final = 64  # one request's attempts (a retry policy allows far fewer)
MAX_TOKENIZER_BYTES: Final = 1 << 20  # a pinned tokenizer.json, compressed, inside one signed offer
MAX_TURNS: Final = 64  # a session's turns (`Prompt.follow_ups` + 1)

FORMULAS: Final[dict[str, str]] = {
    "ttft_ms": "time from sending the request to the first output token of any kind (answer or "
    "reasoning), per request",
    "tpot_ms": "(e2e_ms - ttft_ms) / (output_tokens - 1), per request with at least 2 output tokens",
    "itl_ms": "every gap between consecutive output tokens, pooled over all requests",
    "e2e_ms": "time from sending the request to the last output token, per request",
    "prefill_tok_per_s": "median over requests of prompt_tokens / ttft_s",
    "decode_tok_per_s": "median over requests of (output_tokens - 1) / (e2e_s - ttft_s)",
    "output_tok_per_s": "sum of output_tokens over all successful requests / wall time of the run",
    "request_per_s": "a timed run: successful requests sent within duration_s / duration_s (the tail "
    "after it is not in the divisor); a run through its prompts once: successful requests / wall time "
    "(first request sent to last ended)",
    "goodput": "share of all requests that succeeded and met every SLO",
    "requests_sent": "every attempt whose request was written to the server, retries included (the "
    "server's own count), over the run's requests",
    "error_share": "failed requests / requests; every latency and rate figure is over the successful "
    "requests only, and empty when none succeeded",
    "rouge": "ROUGE-1/2/L F1 of each output against its reference, averaged over requests with one",
    # the declared measurement policy (issue 24): how tokens were counted and what TTFT includes
    "token_source": "where output_tokens came from: server-usage (the stream's usage chunk), "
    "tokenizer:<name>@<revision> (a pinned tokenizer counted the text), chunks (one token per chunk)",
    "tokens_per_chunk_mean": "mean over successful requests with a chunk of output_tokens / chunks "
    "(chunks: stream events that carried answer or reasoning text)",
    "usage_vs_counted_pct": "100 x (sum of usage tokens - sum of tokenizer-counted tokens) / sum of "
    "tokenizer-counted tokens, over successful requests that have both",
    "ttfo_ms": "time from sending the request to the first answer token, after any reasoning tokens "
    "(ttft_ms is the first token of any kind), per request",
    "reasoning_tokens_mean": "mean over successful requests of the reasoning tokens (the usage's "
    "completion_tokens_details.reasoning_tokens, else counted as output_tokens are)",
    "request_rate_achieved": "requests whose first byte was written within the schedule's span / span "
    "(span: duration_s, else the last planned send, else the last send; sessions: their first turns)",
    "schedule_lag_ms": "actual (first byte written) - planned send time per open-loop request",
    "client_saturated": "client CPU over 90 % of one core, p99 send lag over 10 ms, planned sends left "
    "unsent at the deadline, or (open loop) under 95 % of the sends planned within the span sent in it",
    # performance per dollar and per watt (issue 42): the price is the row's PricePerHour
    "cost_per_1k_inferences": "price per hour x median inference ms / 3600 (a tensor task's single stream)",
    "cost_per_m_tokens": "price per hour / 3600 / output tok/s x 10^6 (a generate task)",
    "inferences_per_joule": "1 / EnergyJoulesPerInference (net of idle)",
    "tokens_per_joule": "1 / EnergyJoulesPerToken (net of idle)",
    # a white-box runtime's own timers beside the harness's clock (llama.cpp: llama_perf_context)
    "runtime_pp_tok_per_s": "the runtime's own timer over the timed requests: prompt tokens evaluated "
    "/ their evaluation time (llama-bench's pp)",
    "runtime_tg_tok_per_s": "the runtime's own timer over the timed requests: tokens decoded one at a "
    "time / their evaluation time (llama-bench's tg; the first token of each request is the prompt's)",
    # multi-turn sessions (issue 51, `protocol.sessions`): a conversation replayed turn by turn
    "ttft_ms_by_turn": "per turn index k: median over the successful requests of turn k of ttft_ms (turn "
    "k's request carries turns 1..k-1 and the server's own answers, so a prefix cache shows at k > 1)",
    "sessions": "sessions started (a conversation replayed from its first turn)",
    "session_turns_mean": "mean over sessions of the turns that succeeded (a failed turn ends its session)",
    "sessions_completed": "sessions whose every turn succeeded",
    "session_duration_s": "per session: first turn sent -> last turn's last token (think time between "
    "turns included), median over sessions",
    "session_tokens": "per session: prompt tokens and output tokens summed over its turns, mean over "
    "sessions",
    # a peaks task (issue 53, `protocol.aggregate.derive_peak`): one figure of the unit's peaks
    "peak_gops": "work of one timed call at the figure's size (2 n^3 per n x n product, x the products "
    "a call batches) / the fastest timed call's seconds / 10^9",
    "peak_gbs": "bytes of one timed call at the figure's size (read or written once; a copy's read plus "
    "written, x the passes a call batches) / the fastest timed call's seconds / 10^9",
    "peak_cv": "population standard deviation / mean of the timed calls at the figure's size",
}


TOKEN_SOURCES: Final = ("server-usage", "chunks")  # besides "tokenizer:<name>@<revision>"


class ChatMessage(Value):
    """One turn of a chat conversation, as an OpenAI-compatible `messages` entry."""

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=MAX_PROMPT_CHARS)


class Prompt(Value):
    """One prompt of a generate workload, with an optional reference output for quality scores.

    A dataset (`scheduler.language.dataset`) may give the prompt as chat `messages` (a ShareGPT conversation;
    `text` is then its first user turn), its exact token length under the pinned tokenizer
    (`input_tokens`), and the output length it asks for (`output_tokens`: sent as `max_tokens`).
    """

    id: str = Field(min_length=1, max_length=128)
    text: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    reference: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    messages: tuple[ChatMessage, ...] = Field(default=(), max_length=256)
    input_tokens: int | None = Field(default=None, ge=1)
    output_tokens: int | None = Field(default=None, ge=1, le=32_768)
    # a session (`turns:` beside a dataset): the conversation's later user turns, sent one by one after
    # the first, each request carrying the earlier turns and the answers the server gave (`turn`)
    follow_ups: tuple[str, ...] = Field(default=(), max_length=MAX_TURNS - 1)

    @model_validator(mode="after")
    def _bounded_turns(self) -> Prompt:
        if any(len(t) > MAX_PROMPT_CHARS for t in self.follow_ups):
            raise ValueError(f"a follow-up turn is longer than {MAX_PROMPT_CHARS} characters")
        return self

    def turns(self) -> int:
        """How many turns this prompt's session has (1: a single request)."""
        return 1 + len(self.follow_ups)

    def turn(self, k: int, answers: tuple[str, ...]) -> Prompt:
        """Turn `k` (1-based) as one request: the earlier turns, each followed by the answer the
        server gave it (`answers`, k - 1 of them, each cut to `MAX_PROMPT_CHARS`), then turn k's
        question. Turn 1 is this prompt without its follow-ups; every turn keeps the prompt's id."""
        if not 1 <= k <= self.turns() or len(answers) != k - 1:
            raise ValueError(f"turn {k} of {self.turns()} needs {k - 1} answers, got {len(answers)}")
        first = self.with_(follow_ups=())
        if k == 1:
            return first
        opening = self.messages or (ChatMessage(role="user", content=self.text),)
        questions = (self.text, *self.follow_ups)
        said: list[ChatMessage] = list(opening)
        for i, answer in enumerate(answers):
            said.append(ChatMessage(role="assistant", content=answer[:MAX_PROMPT_CHARS]))
            said.append(ChatMessage(role="user", content=questions[i + 1]))
        return first.with_(text=questions[k - 1], messages=tuple(said), reference=None, input_tokens=None)


class TokenizerPin(Value):
    """A tokenizer the campaign pinned: its name, the sha256 of its `tokenizer.json`, and (for a
    worker to count a server's output with) the file itself, zlib-compressed."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=SHA256_PATTERN)
    data: bytes = Field(default=b"", max_length=MAX_TOKENIZER_BYTES, repr=False)

    def source(self) -> str:
        """The `token_source` of a count made with it: `tokenizer:<name>@<first 12 hex of sha256>`."""
        return f"tokenizer:{self.name}@{self.sha256[:12]}"


class Slo(Value):
    """Service-level objectives: a request counts towards goodput only if it meets every one set."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class CapacitySpec(Value):
    """A search for the highest load that keeps goodput (the `slo`) at `goodput_pct` (`protocol.capacity`).

    Concurrency levels 1, 2, 4, ... up to `max_concurrency`, or request rates from `rate_min` doubling
    up to `rate_max`, then bisection between the last level that passed and the first that failed.
    Each level runs for `level_s` seconds (and at most `level_requests` requests); one that is plainly
    over-saturated (first-token times rising steadily, errors over `max_error_pct`, or more misses
    than `goodput_pct` allows of `level_requests`) ends early, failed, with its reason.
    """

    goodput_pct: float = Field(default=90.0, gt=0, le=100)
    max_concurrency: int | None = Field(default=None, ge=1, le=1024)
    rate_min: float | None = Field(default=None, gt=0)
    rate_max: float | None = Field(default=None, gt=0)
    level_s: float = Field(default=10.0, gt=0, le=3600)
    level_requests: int | None = Field(default=None, ge=1, le=MAX_RECORDS)
    max_error_pct: float = Field(default=10.0, ge=0, le=100)
    rate_resolution_pct: float = Field(default=10.0, gt=0, le=100)

    @model_validator(mode="after")
    def _one_range(self) -> CapacitySpec:
        rates = (self.rate_min, self.rate_max)
        if self.max_concurrency is not None and rates != (None, None):
            raise ValueError("give max_concurrency or a rate range, not both")
        if self.max_concurrency is None and None in rates:
            raise ValueError("give max_concurrency, or a rate range with both min and max")
        if self.rate_min is not None and self.rate_max is not None and self.rate_min > self.rate_max:
            raise ValueError(f"the rate range's min {self.rate_min:g} is above its max {self.rate_max:g}")
        return self


class Endpoint(Value):
    """A model server to measure instead of a model file.

    Gray-box: `url` is None and the worker uses the server its owner declared for `model`.
    Black-box: `url` is the campaign's. The campaign names only `api_key_env`, the submitter's
    environment variable; the submitter puts its value in `api_key` of the one offer to the chosen
    worker (signed, on a Noise-encrypted stream), and nothing else ever holds it. `metrics_url` is
    the server's Prometheus metrics, which the submitter reads itself (`scheduler.verification.
    servercount`); it is taken out of the offer, as the key is put in: the worker never holds it.
    """

    model: str = Field(min_length=1, max_length=256)
    url: str | None = Field(default=None, max_length=2048)
    api_key_env: str | None = Field(default=None, max_length=128)
    metrics_url: str | None = Field(default=None, max_length=2048)
    api_key: str | None = Field(default=None, max_length=4096, repr=False)

    @model_serializer(mode="wrap")
    def _without_metrics(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """No `metrics_url` key when none is named: specs, stores and peers from before it read the same."""
        data: dict[str, object] = handler(self)
        if self.metrics_url is None:
            data.pop("metrics_url", None)
        return data


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
    tokenizer: TokenizerPin | None = None  # counts a server's output when its stream has no usage
    # a random dataset's seed (`scheduler.language.dataset`)
    dataset_seed: int | None = Field(default=None, ge=0)
    capacity: CapacitySpec | None = None  # search levels instead of one load (endpoint jobs only)
    # fleet load (protocol.fleet): members asked for (0: every feasible worker), the schedule's seed,
    # and in the offer to one member only, its deal of the shared schedule
    fleet_size: int | None = Field(default=None, ge=0, le=MAX_FLEET)
    fleet_seed: int | None = Field(default=None, ge=0, lt=2**63)  # None: the submitter draws one
    deal: FleetDeal | None = None
    # a lone worker's open loop (`request_rate`, no fleet, no capacity search): in its offer, the seed
    # of its planned sends, drawn by the submitter, which checks the records against that schedule
    arrival_seed: int | None = Field(default=None, ge=0, lt=2**63)
    # sessions: the wait between a turn's last token and the next turn's send (a user reading, typing)
    think_time_s: float = Field(default=0.0, ge=0, le=3600)
    # a sweep's point (`generate.sweep`): the random dataset's mean input and output lengths asked
    sweep_input_tokens: int | None = Field(default=None, ge=1)
    sweep_output_tokens: int | None = Field(default=None, ge=1)

    def sessions(self) -> bool:
        """Whether the prompts are replayed as sessions (a dataset asked `turns:` beyond the first)."""
        return any(p.follow_ups for p in self.prompts)


ErrorKind = Literal[
    "connect",
    "http_status",
    "rate_limited",
    "server_error",
    "not_sse",
    "stream_error",
    "deadline",
    "response_too_large",
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
    # True: the worker dropped this text so that the result fits one envelope (`node.worker.fit`), or
    # past its run's text budget (`drivers.endpoint.budget`); ROUGE then scores only the requests that kept
    # theirs.
    text_dropped: bool = False
    tokens_counted: bool = False  # True: counted by us, not reported by the server's usage chunk
    # How output_tokens was counted (`FORMULAS["token_source"]`); "" in records from before issue 24.
    token_source: str = Field(default="", max_length=300)
    chunks: int = Field(default=0, ge=0)  # stream events that carried answer or reasoning text
    usage_tokens: int | None = Field(default=None, ge=0)  # the usage chunk's completion_tokens
    counted_tokens: int | None = Field(default=None, ge=0)  # a pinned tokenizer's count of the text
    ttfo_ms: float | None = Field(default=None, ge=0)  # the first answer token, after reasoning
    reasoning_tokens: int = Field(default=0, ge=0)
    input_tokens_asked: int | None = Field(default=None, ge=1)  # the dataset's exact prompt length
    output_tokens_asked: int | None = Field(default=None, ge=1)  # the max_tokens sent for it
    dataset_seed: int | None = Field(default=None, ge=0)
    started_s: float = Field(default=0.0, ge=0)  # its first byte written, seconds since the run began
    error: ErrorKind | None = None
    error_detail: str = Field(default="", max_length=2000)
    planned_s: float | None = Field(default=None, ge=0)  # open loop: when it was due, as started_s
    # the attempts whose request reached the server (retries included; 0: it could not connect)
    attempts: int = Field(default=1, ge=0, le=MAX_ATTEMPTS)
    http_status: int | None = Field(default=None, ge=100, le=599)  # a failed request's last HTTP status
    # sessions: which session of the run (0, 1, ... in the order they started) and which turn (1-based)
    session: int | None = Field(default=None, ge=0)
    turn: int | None = Field(default=None, ge=1, le=MAX_TURNS)


class Rouge(Value):
    """ROUGE F1 scores (0..1), averaged over the requests that had a reference."""

    rouge1: float = Field(ge=0, le=1)
    rouge2: float = Field(ge=0, le=1)
    rouge_l: float = Field(ge=0, le=1)
    scored: int = Field(ge=0)


class RuntimeRates(Value):
    """A white-box runtime's own timers over the timed requests (llama.cpp's `llama_perf_context`),
    kept beside the harness's clock: prompt processing and generation, as llama-bench splits them."""

    source: str = Field(max_length=64)
    prompt_tokens: int = Field(ge=0)
    prompt_ms: float = Field(ge=0)
    eval_tokens: int = Field(ge=0)
    eval_ms: float = Field(ge=0)

    def plus(self, other: RuntimeRates) -> RuntimeRates:
        """Two processes' timers pooled: tokens and times added (one source)."""
        return self.with_(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            prompt_ms=self.prompt_ms + other.prompt_ms,
            eval_tokens=self.eval_tokens + other.eval_tokens,
            eval_ms=self.eval_ms + other.eval_ms,
        )

    def pp_tok_per_s(self) -> float | None:
        """Prompt tokens per second (`FORMULAS["runtime_pp_tok_per_s"]`), None without a timed token."""
        return self.prompt_tokens / self.prompt_ms * 1e3 if self.prompt_ms > 0 else None

    def tg_tok_per_s(self) -> float | None:
        """Generated tokens per second (`FORMULAS["runtime_tg_tok_per_s"]`), None without one."""
        return self.eval_tokens / self.eval_ms * 1e3 if self.eval_ms > 0 else None


class TurnStats(Value):
    """One turn index of a session run: its requests, and their TTFT (`FORMULAS["ttft_ms_by_turn"]`)."""

    turn: int = Field(ge=1, le=MAX_TURNS)
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    ttft_ms: Stats
    prompt_tokens_mean: float = Field(ge=0)


class SessionStats(Value):
    """A session run's sessions (`FORMULAS`: sessions and after)."""

    sessions: int = Field(ge=0)
    completed: int = Field(ge=0)
    turns_mean: float = Field(ge=0)
    turns_asked_mean: float = Field(ge=0)
    duration_s: Stats
    prompt_tokens_mean: float = Field(ge=0)
    output_tokens_mean: float = Field(ge=0)


class GenerationStats(Value):
    """The aggregate of one generate run, each figure computed as `FORMULAS` states."""

    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    requests_sent: int | None = Field(default=None, ge=0)  # every attempt the server received
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
    token_source: str = ""
    tokens_per_chunk_mean: float | None = Field(default=None, ge=0)
    usage_vs_counted_pct: float | None = None
    ttfo_ms: Stats | None = None
    reasoning_tokens_mean: float = Field(default=0.0, ge=0)
    dataset_seed: int | None = None
    rouge: Rouge | None = None
    rtt_ms: float | None = Field(default=None, ge=0)  # endpoint only: TCP's handshake round trip (median)
    tls_ms: float | None = Field(default=None, ge=0)  # endpoint only, https: TLS handshake (median)
    client_overhead_ms: float | None = Field(default=None, ge=0)
    client_cpu_pct: float | None = Field(default=None, ge=0)  # endpoint: the client's CPU over the run
    unsent: int = Field(default=0, ge=0)  # open loop: planned sends the run's deadline came before
    # derived (`protocol.clientload`) from the records, client_cpu_pct and unsent:
    schedule_span_s: float | None = Field(default=None, ge=0)
    request_rate_achieved: float | None = Field(default=None, ge=0)
    schedule_lag_ms_p50: float | None = None
    schedule_lag_ms_p99: float | None = None
    client_saturated: bool = False
    client_saturated_reason: str = Field(default="", max_length=2000)
    runtime_rates: RuntimeRates | None = None  # a white-box runtime's own timers (llama.cpp)
    by_turn: tuple[TurnStats, ...] = Field(default=(), max_length=MAX_TURNS)  # sessions only
    sessions: SessionStats | None = None
    formulas: dict[str, str] = Field(default_factory=lambda: dict(FORMULAS))
    records: tuple[RequestRecord, ...] = Field(default=(), max_length=MAX_RECORDS)
