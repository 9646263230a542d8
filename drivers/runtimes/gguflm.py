"""White-box generation on llama.cpp: a GGUF model answering prompts on `CPU (llama.cpp)` or
`GPU (llama.cpp)`, timed token by token like the transformers path (`drivers.runtimes.llm`).

The generate child (`drivers.measuring.genchild`) calls the same functions here as in `drivers.runtimes.llm`
(`drivers.runtimes.genruntime`: `check_layout`, `device_for`, `prepare`, `check_context`, `load`,
`versions`), and the
loaded model answers `generate` with the same `RequestRecord`. Beside the harness's own clock, the
run keeps llama.cpp's timers (`llama_perf_context`) over the timed requests: prompt tokens per second
and generated tokens per second, as llama-bench reports pp and tg.

Greedy decoding, one sequence, the KV cache cleared between requests. A prompt is put through the
model's own chat template by llama.cpp (`llama_chat_apply_template`, no jinja).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
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
PIECE_BYTES: Final = 256
PERF_SOURCE: Final = "llama_perf_context"


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
    """Refuse `max_new_tokens` at or beyond the model's context (from its bounded header).

    Raises:
        TaskFailed: INPUT naming both numbers, FORMAT for a lying header.
    """
    context = min(check_gguf(path).context_length or MAX_CONTEXT, MAX_CONTEXT)
    if spec.max_new_tokens >= context:
        raise TaskFailed(
            FailureReason.INPUT,
            f"max_new_tokens {spec.max_new_tokens} is not below {path.name}'s context of {context} tokens",
        )


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
    """Load a GGUF file and make its context; llama.cpp's log of the load says where layers went."""
    bound = target.bound
    lib, ffi = bound.lib, bound.ffi
    bound.take_log()
    params = lib.llama_model_default_params()
    params.n_gpu_layers = llamacpp.ALL_LAYERS if target.offload else 0
    raw = lib.llama_model_load_from_file(str(path).encode(), params)
    log = bound.take_log()
    if raw == ffi.NULL:
        raise TaskFailed(FailureReason.LOAD, f"{path.name}: llama.cpp: {_last_error(log)}")
    model = ffi.gc(raw, lib.llama_model_free)  # freed when let go (a timed reload lets the last one go)
    n_ctx = min(int(lib.llama_model_n_ctx_train(model)) or context, context)
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch = n_ctx, n_ctx
    cparams.n_threads, cparams.n_threads_batch = threads, threads
    cparams.no_perf = False
    raw_ctx = lib.llama_init_from_model(model, cparams)
    if raw_ctx == ffi.NULL:
        raise TaskFailed(
            FailureReason.LOAD, f"{path.name}: llama.cpp context: {_last_error(bound.take_log())}"
        )
    ctx = ffi.gc(raw_ctx, lambda c, held=model: lib.llama_free(c))  # the model outlives its context
    layers = llamacpp.layers_on(log)
    return LoadedGguf(bound, model, ctx, path.name, llamacpp.placement(layers, target.device), threads)


def _last_error(log: list[str]) -> str:
    lines = [line.strip() for line in log if line.strip()]
    return lines[-1] if lines else "the model did not load"


@dataclass
class LoadedGguf:
    """A GGUF model and its context on one llama.cpp device, answering prompts one at a time."""

    bound: Binding
    model: Any
    ctx: Any
    name: str
    where: Placement
    n_threads: int

    def placement(self) -> Placement:
        """Where llama.cpp assigned the layers (read from its load log)."""
        return self.where

    def threads(self) -> int:
        """The threads llama.cpp decodes with."""
        return self.n_threads

    def close(self) -> None:
        """Free the context, then the model (each at most once)."""
        self.bound.ffi.release(self.ctx)
        self.bound.ffi.release(self.model)

    def reset_rates(self) -> None:
        """Start llama.cpp's timers again (before the timed requests)."""
        self.bound.lib.llama_perf_context_reset(self.ctx)

    def rates(self) -> RuntimeRates:
        """llama.cpp's timers since the last reset: prompt and generation tokens and their times."""
        perf = self.bound.lib.llama_perf_context(self.ctx)
        return RuntimeRates(
            source=PERF_SOURCE,
            prompt_tokens=int(perf.n_p_eval),
            prompt_ms=float(perf.t_p_eval_ms),
            eval_tokens=int(perf.n_eval),
            eval_ms=float(perf.t_eval_ms),
        )

    def tokenize(self, text: bytes) -> list[int]:
        """`text`'s tokens (special tokens parsed, BOS added where the vocabulary asks for it)."""
        lib, ffi = self.bound.lib, self.bound.ffi
        vocab = lib.llama_model_get_vocab(self.model)
        size = len(text) + 16
        buf = ffi.new("llama_token[]", size)
        n = lib.llama_tokenize(vocab, text, len(text), buf, size, True, True)
        if n < 0:
            size = -n
            buf = ffi.new("llama_token[]", size)
            n = lib.llama_tokenize(vocab, text, len(text), buf, size, True, True)
        return list(buf[0:n])

    def prompt_text(self, prompt: Prompt, chat: bool) -> bytes:
        """The prompt as the model sees it: through its chat template when `chat` is set."""
        if not chat:
            return prompt.text.encode()
        lib, ffi = self.bound.lib, self.bound.ffi
        template = lib.llama_model_chat_template(self.model, ffi.NULL)
        if template == ffi.NULL:
            raise TaskFailed(FailureReason.INPUT, f"{self.name}: chat asked for, but it has no chat template")
        turns = prompt.messages or (ChatMessage(role="user", content=prompt.text),)
        keep = [(ffi.new("char[]", t.role.encode()), ffi.new("char[]", t.content.encode())) for t in turns]
        messages = ffi.new("struct llama_chat_message[]", len(keep))
        for i, (role, content) in enumerate(keep):
            messages[i].role, messages[i].content = role, content
        size = 2 * sum(len(t.content) + 32 for t in turns) + 256
        for _ in range(2):
            buf = ffi.new("char[]", size)
            n = lib.llama_chat_apply_template(template, messages, len(keep), True, buf, size)
            if n < 0:
                raise TaskFailed(
                    FailureReason.INPUT, f"{self.name}: llama.cpp cannot apply its chat template"
                )
            if n <= size:
                return bytes(ffi.buffer(buf, n))
            size = n
        raise TaskFailed(FailureReason.INTERNAL, f"{self.name}: the chat template's length changed")

    def first_token(self, text: bytes) -> int:
        """Decode `text` and sample one greedy token (the probe's run).

        Raises:
            TaskFailed: CRASHED when the decode fails.
        """
        new, _ = self._decode(self.tokenize(text), 1, ignore_eos=True)
        return new[0]

    def generate(self, prompt: Prompt, spec: GenerateSpec) -> RequestRecord:
        """One greedy request, every output token timed from the first decode call.

        Raises:
            TaskFailed: INPUT when the prompt plus `max_new_tokens` exceed the context, CRASHED when a
                decode fails.
        """
        tokens = self.tokenize(self.prompt_text(prompt, spec.chat))
        max_new = prompt.output_tokens or spec.max_new_tokens
        context = int(self.bound.lib.llama_n_ctx(self.ctx))
        if len(tokens) + max_new > context:
            raise TaskFailed(
                FailureReason.INPUT,
                f"prompt {prompt.id}: {len(tokens)} prompt tokens + max_new_tokens {max_new} "
                f"exceed the context of {context} tokens",
            )
        start_ns = time.perf_counter_ns()
        new, stamps = self._decode(tokens, max_new, spec.ignore_eos)
        times = tuple((t - start_ns) / NS_PER_MS for t in stamps)
        return RequestRecord(
            prompt_id=prompt.id,
            prompt_tokens=len(tokens),
            output_tokens=len(new),
            ttft_ms=times[0] if times else None,
            ttfo_ms=times[0] if times else None,
            chunks=len(times),
            counted_tokens=len(new),
            token_source=f"tokenizer:{self.name}",  # the harness adds the model's digest (its revision)
            input_tokens_asked=prompt.input_tokens,
            output_tokens_asked=prompt.output_tokens,
            dataset_seed=spec.dataset_seed,
            e2e_ms=times[-1] if times else (time.perf_counter_ns() - start_ns) / NS_PER_MS,
            token_times_ms=times,
            output_text=self.detokenize(new),
            tokens_counted=True,
        )

    def _decode(self, tokens: list[int], max_new: int, ignore_eos: bool) -> tuple[list[int], list[int]]:
        """Greedy tokens after `tokens` (an end-of-generation token included, then stop unless
        `ignore_eos`), and the clock at each (ns)."""
        lib, ffi = self.bound.lib, self.bound.ffi
        vocab = lib.llama_model_get_vocab(self.model)
        lib.llama_kv_cache_clear(self.ctx)
        sampler = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        lib.llama_sampler_chain_add(sampler, lib.llama_sampler_init_greedy())
        new: list[int] = []
        stamps: list[int] = []
        feed = ffi.new("llama_token[]", tokens)
        batch = lib.llama_batch_get_one(feed, len(tokens))
        try:
            while len(new) < max_new:
                if lib.llama_decode(self.ctx, batch) != 0:
                    raise TaskFailed(FailureReason.CRASHED, f"{self.name}: llama_decode failed")
                token = int(lib.llama_sampler_sample(sampler, self.ctx, -1))
                stamps.append(time.perf_counter_ns())
                new.append(token)
                if lib.llama_vocab_is_eog(vocab, token) and not ignore_eos:
                    break
                feed = ffi.new("llama_token[]", [token])
                batch = lib.llama_batch_get_one(feed, 1)
        finally:
            lib.llama_sampler_free(sampler)
        return new, stamps

    def detokenize(self, tokens: list[int]) -> str:
        """The text of generated tokens, special tokens left out (as `skip_special_tokens`)."""
        lib, ffi = self.bound.lib, self.bound.ffi
        vocab = lib.llama_model_get_vocab(self.model)
        piece = ffi.new("char[]", PIECE_BYTES)
        parts = []
        for token in tokens:
            n = lib.llama_token_to_piece(vocab, token, piece, PIECE_BYTES, 0, False)
            parts.append(bytes(ffi.buffer(piece, n)) if n > 0 else b"")
        return b"".join(parts).decode(errors="replace")


__all__ = ["LoadedGguf", "check_context", "check_layout", "device_for", "load", "open_model", "versions"]
