"""White-box generation on llama.cpp: a GGUF model answering prompts on `CPU (llama.cpp)` or
`GPU (llama.cpp)`, timed token by token like the transformers path (`drivers.runtimes.llm`).

The generate child (`drivers.measuring.genchild`) calls the same functions here as in `drivers.runtimes.llm`
(`drivers.runtimes.genruntime`: `check_layout`, `device_for`, `prepare`, `check_context`, `load`,
`versions`), and the
loaded model answers `generate` with the same `RequestRecord`. Beside the harness's own clock, the
run keeps llama.cpp's own timers over the timed requests (its server's `timings` of each request:
prompt and generation tokens and their times), prompt tokens per second and generated tokens per
second, as llama-bench reports pp and tg.

Each request goes to llama.cpp's server inside this process (xllamacpp's `Server`): one slot,
greedy, streamed, each chunk stamped on the harness's clock as it arrives and carrying how many
tokens were decoded by then (`timings_per_token`), so every token is timed and counted by llama.cpp
itself. No prompt is cached between requests (`cache_prompt` off, no RAM cache): each is prefilled
whole, as the KV cache was cleared between requests before.

TTFT on a white-box unit runs from the prompt's tokens handed to the runtime to the first output
token, as on the transformers units (`drivers.runtimes.llm` tokenizes and templates before its
clock): a prompt is made into tokens first, by llama.cpp's own server (`LoadedGguf.tokens`: its
`/apply-template` for a chat prompt, the function its chat completions call, the model's own chat
template through `llama_chat_apply_template`, no jinja, refused where the GGUF's header holds none;
then its `/tokenize` with the special tokens parsed and the model's BOS added, as it tokenizes a
completion's prompt), asked on the server's loopback port with the key only this process holds. The
clock starts after, and the request carries the token ids (`prompt` as a list of ids: llama.cpp
evaluates them as given). Tokenizing is outside TTFT on every white-box unit (a vocabulary of many
special tokens, Gemma 3's 6,414, costs about 1 ms a prompt), and inside it on an endpoint, whose
TTFT runs from the request sent (`drivers.endpoint`). The row's prompt tokens are the ids sent,
checked against llama.cpp's own count of the prompt it evaluated.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psutil

from drivers.errors import TaskFailed
from drivers.files.headers import check_gguf
from drivers.runtimes import llamacpp
from drivers.runtimes.driver import Placement
from drivers.runtimes.llamacpp import Binding, Target
from protocol import (
    ChatMessage,
    ComputeUnit,
    FailureReason,
    GenerateSpec,
    ModelFormat,
    Prompt,
    RequestRecord,
    RuntimeRates,
)

FORMATS: Final = frozenset({ModelFormat.GGUF})
NS_PER_MS: Final = 1e6
MAX_CONTEXT: Final = 4096  # the context a loaded model gets (its trained context, if smaller)
PERF_SOURCE: Final = "llama.cpp server timings"
_NO_TEMPLATE: Final = "{}: chat asked for, but it has no chat template (give the job chat: false)"
_ERROR: Final = re.compile(r"^\S+ E (.+)$")
_NO_TIMERS: Final = RuntimeRates(
    source=PERF_SOURCE, prompt_tokens=0, prompt_ms=0.0, eval_tokens=0, eval_ms=0.0
)


def device_for(unit: ComputeUnit) -> tuple[str | None, str]:
    """The ggml device a llama.cpp unit asks its layers onto, or None and why (where the layers really
    went is read after the load: `LoadedGguf.placement`)."""
    if unit not in llamacpp.UNITS:
        return None, f"llama.cpp runs on {' or '.join(u.value for u in llamacpp.UNITS)}, not {unit.value}"
    target, reason = llamacpp.binding(unit)
    return (target.device, "") if target is not None else (None, reason)


def prepare() -> None:
    """Nothing to import ahead: the build is loaded by `device_for`."""


def versions() -> dict[str, str]:
    """The binding's version."""
    return llamacpp.versions()


def thread_count(asked: int | None) -> int:
    """The threads llama.cpp runs with: the job's, else the device's physical cores."""
    return asked or psutil.cpu_count(logical=False) or 1


def check_layout(path: Path, fmt: ModelFormat) -> None:
    """Refuse anything but a single GGUF file.

    Raises:
        TaskFailed: FORMAT.
    """
    if fmt != ModelFormat.GGUF or not path.is_file():
        raise TaskFailed(FailureReason.FORMAT, f"{path.name}: llama.cpp reads one GGUF file, not {fmt}")


def check_context(path: Path, fmt: ModelFormat, spec: GenerateSpec) -> None:
    """Refuse `max_new_tokens` at or beyond the model's context, and chat asked of a model whose GGUF
    holds no chat template (both from its bounded header, before any load).

    Raises:
        TaskFailed: INPUT naming both numbers or the missing template, FORMAT for a lying header.
    """
    header = check_gguf(path)
    context = min(header.context_length or MAX_CONTEXT, MAX_CONTEXT)
    if spec.max_new_tokens >= context:
        raise TaskFailed(
            FailureReason.INPUT,
            f"max_new_tokens {spec.max_new_tokens} is not below {path.name}'s context of {context} tokens",
        )
    if spec.chat and not header.chat_template:
        raise TaskFailed(FailureReason.INPUT, _NO_TEMPLATE.format(path.name))


def load(path: Path, fmt: ModelFormat, unit: ComputeUnit, threads: int | None = None) -> LoadedGguf:
    """Load the GGUF on the unit's build, every layer offloaded on a GPU unit.

    Raises:
        TaskFailed: UNIT_UNAVAILABLE, FORMAT, or LOAD with llama.cpp's last log line.
    """
    check_layout(path, fmt)
    target, reason = llamacpp.binding(unit)
    if target is None:
        raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {reason}")
    return open_model(target, path, thread_count(threads), MAX_CONTEXT)


def open_model(target: Target, path: Path, threads: int, context: int) -> LoadedGguf:
    """Load a GGUF file in llama.cpp's in-process server (its header checked first); llama.cpp's log
    of the load says where the layers went.

    Raises:
        TaskFailed: FORMAT for a lying header, LOAD with llama.cpp's first error line.
    """
    header = check_gguf(path)
    bound = target.bound
    params = bound.module.CommonParams()
    params.model.path = str(path)
    params.n_ctx = min(header.context_length or context, context)
    params.n_batch = params.n_ctx  # a prompt is one batch, as llama-bench's pp
    params.n_parallel, params.n_threads_http = 1, 1
    params.n_gpu_layers = llamacpp.ALL_LAYERS if target.offload else 0
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.warmup = False  # the harness warms up itself, untimed
    params.ctx_shift = False  # a request past the context ends there, never shifts it
    params.cache_ram_mib = 0  # no prompt kept between requests (each request is prefilled whole)
    params.use_jinja = False  # the model's template through llama_chat_apply_template, as llama-cli
    key = secrets.token_hex(16)
    params.api_keys = [key]  # its loopback port answers no one but this process (`LoadedGguf.tokens`)
    params.verbosity = bound.verbosity()
    server = None
    # "Failed to init server" (a RuntimeError) says nothing: the reason is llama.cpp's log
    with bound.captured() as log, contextlib.suppress(RuntimeError):
        server = bound.module.Server(params)
    if server is None:
        raise TaskFailed(FailureReason.LOAD, f"{path.name}: llama.cpp: {_first_error(log)}")
    layers = llamacpp.layers_on(log) or llamacpp.layers_summarized(log, bound.gpus())
    where = llamacpp.placement(layers, target.device)
    return LoadedGguf(bound, server, path.name, where, threads, params.n_ctx, header.chat_template, key)


def _first_error(log: list[str]) -> str:
    """llama.cpp's first error line (its level letter "E"), else its last line."""
    errors = [m.group(1) for line in log if (m := _ERROR.match(line))]
    lines = [line.strip() for line in log if line.strip()]
    return (errors or lines or ["the model did not load"])[0 if errors else -1][:300]


@dataclass
class _Stream:
    """One streamed request's chunks, each with the clock when it arrived (ns)."""

    chunks: list[tuple[int, str]] = field(default_factory=list)

    def __call__(self, chunk: str) -> None:
        self.chunks.append((time.perf_counter_ns(), chunk))


@dataclass
class LoadedGguf:
    """A GGUF model in llama.cpp's in-process server on one device, answering prompts one at a time."""

    bound: Binding
    server: Any
    name: str
    where: Placement
    n_threads: int
    n_ctx: int
    chat_template: bool
    key: str = field(repr=False)  # the server's API key: its loopback port answers this process alone
    timers: RuntimeRates = field(default_factory=lambda: _NO_TIMERS)

    def placement(self) -> Placement:
        """Where llama.cpp assigned the layers (read from its load log)."""
        return self.where

    def threads(self) -> int:
        """The threads llama.cpp decodes with."""
        return self.n_threads

    def close(self) -> None:
        """Let the server go: its loop ends and the model is freed.

        One request goes through the server's queue first (a one-token decode). xllamacpp's
        `Server` says it is ready before its loop runs (its `init` thread sets the constructor's
        promise, then calls `start_loop`, which sets the queue running); a server dropped in between
        is told to stop before its loop begins, and the loop then never ends while the destructor
        joins it. A measuring child that loaded the model twice (`load_runs`) hung there for good
        under load (the runtimes example at load 12; CI at 2e8566e). A request answered proves the
        loop runs, so the destructor's stop is seen.
        """
        if self.server is None:
            return
        with contextlib.suppress(TaskFailed):  # a server that cannot answer cannot have started its loop late
            self.first_token(b" ")
        self.server = None

    def reset_rates(self) -> None:
        """Start llama.cpp's timers again (before the timed requests)."""
        self.timers = _NO_TIMERS

    def rates(self) -> RuntimeRates:
        """llama.cpp's timers since the last reset: prompt and generation tokens and their times.

        llama.cpp's server counts the first token (sampled from the prompt's logits) among the
        predicted ones but times generation from it: the generation tokens here are those its
        generation time covers, one fewer per request.
        """
        return self.timers

    def first_token(self, text: bytes) -> int:
        """Decode `text` and sample one greedy token (the probe's run); the tokens generated.

        Raises:
            TaskFailed: CRASHED when the request fails.
        """
        stream = self._ask({"prompt": text.decode(errors="replace")}, 1, ignore_eos=True)
        return len(_read(stream, self.name).stamps)

    def tokens(self, prompt: Prompt, chat: bool) -> list[int]:
        """The prompt's token ids as llama.cpp's server makes them of a request: a chat prompt through
        the model's chat template by its `/apply-template` (what its chat completions call), then its
        `/tokenize` with the special tokens parsed and the model's BOS added (as a completion's prompt
        is tokenized).

        Raises:
            TaskFailed: INPUT for chat asked of a model without a template, CRASHED when the server
                refuses or answers something else than token ids.
        """
        text = prompt.text
        if chat:
            if not self.chat_template:
                raise TaskFailed(FailureReason.INPUT, _NO_TEMPLATE.format(self.name))
            turns = prompt.messages or (ChatMessage(role="user", content=prompt.text),)
            messages = [{"role": t.role, "content": t.content} for t in turns]
            templated = self._call("/apply-template", {"messages": messages}).get("prompt")
            if not isinstance(templated, str):
                raise TaskFailed(FailureReason.CRASHED, f"{self.name}: llama.cpp's template gave no prompt")
            text = templated
        ids = self._call("/tokenize", {"content": text, "add_special": True, "parse_special": True})
        tokens = ids.get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int and t >= 0 for t in tokens):
            raise TaskFailed(FailureReason.CRASHED, f"{self.name}: llama.cpp's tokenizer gave no token ids")
        return tokens

    def generate(self, prompt: Prompt, spec: GenerateSpec) -> RequestRecord:
        """One greedy request of the prompt's token ids (`tokens`), every output token timed from the
        ids handed to the server.

        Raises:
            TaskFailed: INPUT when the prompt plus `max_new_tokens` exceed the context or chat is asked
                of a model without a template, CRASHED when the request fails or llama.cpp counts
                another prompt than the ids sent.
        """
        max_new = prompt.output_tokens or spec.max_new_tokens
        ids = self.tokens(prompt, spec.chat)
        if len(ids) + max_new > self.n_ctx:
            raise TaskFailed(
                FailureReason.INPUT,
                f"prompt {prompt.id}: {len(ids)} prompt tokens + max_new_tokens {max_new} "
                f"exceed the context of {self.n_ctx} tokens",
            )
        start_ns = time.perf_counter_ns()  # the prompt's tokens handed to the runtime
        read = _read(self._ask({"prompt": ids}, max_new, spec.ignore_eos), self.name)
        if read.prompt_tokens != len(ids) or read.timers.prompt_tokens != len(ids):
            raise TaskFailed(
                FailureReason.CRASHED,
                f"{self.name}: llama.cpp counted {read.prompt_tokens} prompt tokens "
                f"({read.timers.prompt_tokens} evaluated) where {len(ids)} were sent",
            )
        self.timers = self.timers.plus(read.timers)
        times = tuple((t - start_ns) / NS_PER_MS for t in read.stamps)
        return RequestRecord(
            prompt_id=prompt.id,
            prompt_tokens=len(ids),
            output_tokens=len(times),
            ttft_ms=times[0] if times else None,
            ttfo_ms=times[0] if times else None,
            chunks=len(times),
            counted_tokens=len(times),
            token_source=f"tokenizer:{self.name}",  # the harness adds the model's digest (its revision)
            input_tokens_asked=prompt.input_tokens,
            output_tokens_asked=prompt.output_tokens,
            dataset_seed=spec.dataset_seed,
            e2e_ms=times[-1] if times else (time.perf_counter_ns() - start_ns) / NS_PER_MS,
            token_times_ms=times,
            output_text=read.text,
            tokens_counted=True,
        )

    def _call(self, path: str, body: dict[str, object]) -> dict[str, Any]:
        """One call to the server's own HTTP handler (`llamacpp.call`).

        Raises:
            TaskFailed: CRASHED naming the call and llama.cpp's answer.
        """
        answer, why = llamacpp.call(self.server, self.key, path, body)
        if answer is None:
            raise TaskFailed(FailureReason.CRASHED, f"{self.name}: llama.cpp's {path}: {why}")
        return answer

    def _ask(self, body: dict[str, object], max_new: int, ignore_eos: bool) -> _Stream:
        """One streamed, greedy request to the server; its chunks as they came."""
        request = body | {
            "n_predict": max_new,
            "stream": True,
            "temperature": 0.0,
            "top_k": 1,
            "ignore_eos": ignore_eos,
            "cache_prompt": False,  # each request prefilled whole: the KV cache cleared between them
            "timings_per_token": True,  # each chunk says how many tokens were decoded by then
            "stream_options": {"include_usage": True},  # the last chunk counts them too
        }
        stream = _Stream()
        try:
            self.server.handle_completions(json.dumps(request), stream)
        except Exception as exc:  # the server's own refusal (a prompt past the context...)
            raise TaskFailed(FailureReason.CRASHED, f"{self.name}: llama.cpp: {exc}") from exc
        return stream


@dataclass(frozen=True)
class _Read:
    stamps: list[int]
    text: str
    prompt_tokens: int
    timers: RuntimeRates


def _read(stream: _Stream, name: str) -> _Read:
    """A request's tokens, each at the clock of the chunk that brought it (a chunk says how many tokens
    were decoded by then: one that brings two, a piece of a character held back, stamps both), its
    text, and llama.cpp's timings of it.

    Raises:
        TaskFailed: CRASHED for an error chunk or a count that disagrees with the server's own.
    """
    stamps: list[int] = []
    parts: list[str] = []
    last: dict[str, Any] = {}
    for at, raw in stream.chunks:
        chunk = json.loads(raw)
        if not isinstance(chunk, dict) or "error" in chunk:
            raise TaskFailed(FailureReason.CRASHED, f"{name}: llama.cpp: {str(chunk)[:300]}")
        choice = (chunk.get("choices") or [{}])[0]
        parts.append(choice.get("text") or (choice.get("delta") or {}).get("content") or "")
        decoded = int((chunk.get("timings") or {}).get("predicted_n", len(stamps)))
        stamps.extend([at] * (decoded - len(stamps)))
        last = chunk
    usage, timings = last.get("usage") or {}, last.get("timings") or {}
    counted = usage.get("completion_tokens", len(stamps))
    if not timings or counted != len(stamps) or timings.get("predicted_n") != len(stamps):
        raise TaskFailed(
            FailureReason.CRASHED,
            f"{name}: llama.cpp's count of the tokens ({counted}) or its timings disagree with its "
            f"chunks ({len(stamps)} tokens)",
        )
    prompt_tokens = int(timings["prompt_n"]) + int(timings.get("cache_n", 0))
    timers = RuntimeRates(
        source=PERF_SOURCE,
        prompt_tokens=int(timings["prompt_n"]),
        prompt_ms=float(timings["prompt_ms"]),
        eval_tokens=max(int(timings["predicted_n"]) - 1, 0),
        eval_ms=float(timings["predicted_ms"]),
    )
    return _Read(stamps, "".join(parts), int(usage.get("prompt_tokens", prompt_tokens)), timers)


__all__ = ["LoadedGguf", "check_context", "check_layout", "device_for", "load", "open_model", "versions"]
