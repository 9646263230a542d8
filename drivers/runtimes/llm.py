"""White-box generation on transformers: `CPU (PyTorch)` and `GPU (PyTorch)` for GGUF files and
Hugging Face folders of safetensors.

Only formats that run no code are opened: a GGUF file (dequantized by transformers through `gguf`) or
a folder with `config.json`, a tokenizer and `*.safetensors` weights (`use_safetensors=True`, so a
pickled `.bin` is never a fallback). `trust_remote_code` is always False and the hub is never asked
(`HF_HUB_OFFLINE`, `local_files_only`). transformers and torch are imported inside these functions,
in the spawned child, never at module import.
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from drivers.errors import TaskFailed
from drivers.files.headers import check_gguf
from drivers.runtimes.driver import Placement
from drivers.runtimes.missing import not_installed
from drivers.runtimes.torchrt import TorchDriver
from protocol import (
    ChatMessage,
    ComputeUnit,
    FailureReason,
    GenerateSpec,
    ModelFormat,
    Prompt,
    RequestRecord,
    RuntimeRates,
    UnitStatus,
)

GENERATIVE_UNITS: Final = (ComputeUnit.CPU_TORCH, ComputeUnit.GPU_TORCH)
GENERATIVE_FORMATS: Final = frozenset({ModelFormat.GGUF, ModelFormat.SAFETENSORS})
FORMATS: Final = GENERATIVE_FORMATS  # as `drivers.runtimes.genruntime` names it
TOKENIZER_FILES: Final = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
NS_PER_MS: Final = 1e6


def missing_runtime() -> str:
    """Why generation cannot run here ("" when transformers, gguf and torch are installed)."""
    missing = [m for m in ("torch", "transformers", "gguf") if importlib.util.find_spec(m) is None]
    return not_installed(missing, "llm", "generation") if missing else ""


def device_for(unit: ComputeUnit) -> tuple[str | None, str]:
    """The torch device a generative unit runs on, or None and why."""
    if unit not in GENERATIVE_UNITS:
        return None, f"generation runs on {' or '.join(u.value for u in GENERATIVE_UNITS)}, not {unit.value}"
    missing = missing_runtime()
    if missing:
        return None, missing
    return TorchDriver(unit).device()


def prepare() -> None:
    """Import torch and transformers (seconds: kept out of load time), offline and quiet."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"  # the GGUF loader's own tqdm bar, which the call below misses
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def versions() -> dict[str, str]:
    """Versions of the generation runtime's packages."""
    import torch
    import transformers

    return {"torch": str(torch.__version__), "transformers": str(transformers.__version__)}


def probe(unit: ComputeUnit) -> UnitStatus:
    """Whether a tiny randomly initialised Llama, built in memory, generates 2 tokens on this unit."""
    device, reason = device_for(unit)
    if device is None:
        return UnitStatus(unit=unit, usable=False, reason=reason)
    try:
        prepare()
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=32,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=32,
        )
        model = LlamaForCausalLM(config).to(device).eval()
        ids = torch.tensor([[1, 2, 3]], device=device)
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=2,
            min_new_tokens=2,
            do_sample=False,
            pad_token_id=0,
        )
        ok = tuple(out.shape) == (1, 5)
    except Exception as exc:  # the runtime's error is the reason
        return UnitStatus(unit=unit, usable=False, reason=f"generation probe: {type(exc).__name__}: {exc}")
    return UnitStatus(
        unit=unit, usable=ok, reason="" if ok else "probe generated the wrong length", provider=device
    )


def gguf_named(path: Path, fmt: ModelFormat, folder: Path) -> Path:
    """The model path as transformers must see it: a GGUF file's name must end in `.gguf`.

    A worker's cache names files by digest; transformers would take a GGUF without the suffix for a
    torch checkpoint (and torch.load it). Such a file gets a `<name>.gguf` symlink in `folder`.
    """
    if fmt != ModelFormat.GGUF or path.suffix.lower() == ".gguf":
        return path
    link = folder / f"{path.name}.gguf"
    link.symlink_to(path.resolve())
    return link


def _sources(path: Path, fmt: ModelFormat) -> tuple[str, dict[str, Any]]:
    """Where transformers reads the model from, and the keyword arguments that keep it code-free."""
    common: dict[str, Any] = {"trust_remote_code": False, "local_files_only": True}
    if fmt == ModelFormat.GGUF:
        return str(path.parent), common | {"gguf_file": path.name}
    if fmt != ModelFormat.SAFETENSORS:
        raise TaskFailed(
            FailureReason.FORMAT, f"{path.name}: generation reads GGUF or safetensors, not {fmt}"
        )
    if not path.is_dir() or not (path / "config.json").is_file():
        raise TaskFailed(FailureReason.FORMAT, f"{path.name}: not a Hugging Face folder (no config.json)")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise TaskFailed(
            FailureReason.FORMAT, f"{path.name}: no tokenizer in the folder ({', '.join(TOKENIZER_FILES)})"
        )
    if not any(path.glob("*.safetensors")):
        raise TaskFailed(FailureReason.FORMAT, f"{path.name}: no *.safetensors weights in the folder")
    return str(path), common | {"use_safetensors": True}


def check_context(path: Path, fmt: ModelFormat, spec: GenerateSpec) -> None:
    """Refuse `max_new_tokens` at or beyond the model's context before the (slow) load.

    A GGUF file's context is read from its bounded header (`drivers.files.headers`): transformers' own
    GGUF reader builds every metadata value (the tokenizer's ~100,000 strings), tens of seconds on
    two cores, and the load reads them again. A folder's comes from its `config.json`.

    Raises:
        TaskFailed: INPUT naming both numbers, FORMAT for a lying header, or LOAD when a folder's
            config cannot be read.
    """
    if fmt == ModelFormat.GGUF:
        context = check_gguf(path).context_length
    else:
        context = getattr(_config(path, fmt), "max_position_embeddings", None)
    if isinstance(context, int) and spec.max_new_tokens >= context:
        raise TaskFailed(
            FailureReason.INPUT,
            f"max_new_tokens {spec.max_new_tokens} is not below {path.name}'s context of {context} tokens",
        )


def check_layout(path: Path, fmt: ModelFormat) -> None:
    """Refuse a model that is not a code-free GGUF file or Hugging Face folder before any import.

    Raises:
        TaskFailed: FORMAT naming what is missing.
    """
    _sources(path, fmt)


def _config(path: Path, fmt: ModelFormat) -> Any:
    """The model's transformers config (for a GGUF file, one full read of its metadata)."""
    source, kwargs = _sources(path, fmt)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, **kwargs)
    except Exception as exc:  # a truncated file, an unknown architecture: transformers says which
        raise TaskFailed(FailureReason.LOAD, f"{path.name}: config: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def load(path: Path, fmt: ModelFormat, unit: ComputeUnit, threads: int | None = None) -> LoadedLlm:
    """Load the tokenizer and the causal LM onto the unit's device.

    Raises:
        TaskFailed: UNIT_UNAVAILABLE, FORMAT (not a code-free layout), or LOAD with the stage
            (config, tokenizer or model) and transformers' own error.
    """
    device, reason = device_for(unit)
    if device is None:
        raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {reason}")
    source, kwargs = _sources(path, fmt)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        torch.set_num_threads(threads)
    config = _config(path, fmt)  # read once: the model is given it, not left to read it again
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    except Exception as exc:  # translate transformers' errors at the seam
        raise TaskFailed(FailureReason.LOAD, f"{path.name}: tokenizer: {_first_line(exc)}") from exc
    try:
        model = AutoModelForCausalLM.from_pretrained(source, config=config, **kwargs).to(device).eval()
    except Exception as exc:  # an unsupported architecture, a truncated file, a bad config
        raise TaskFailed(FailureReason.LOAD, f"{path.name}: model: {_first_line(exc)}") from exc
    return LoadedLlm(model, tokenizer, device, path.name)


@dataclass
class LoadedLlm:
    """A causal LM and its tokenizer on a device, ready to answer prompts one at a time."""

    model: Any
    tokenizer: Any
    device: str
    name: str

    def placement(self) -> Placement:
        """The torch device that holds the model (transformers says no more)."""
        return Placement((self.device,))

    def threads(self) -> int:
        """torch's intra-op threads."""
        import torch

        return int(torch.get_num_threads())

    def reset_rates(self) -> None:
        """transformers keeps no timers of its own."""

    def rates(self) -> RuntimeRates | None:
        """None: transformers keeps no timers of its own (the harness's clock is the only one)."""
        return None

    def close(self) -> None:
        """Nothing runs beside the model: it is freed with this object."""

    def context_length(self) -> int | None:
        """The model's maximum sequence length, when its config states one."""
        value = getattr(self.model.config, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) else None

    def encode(self, prompt: Prompt, chat: bool) -> Any:
        """The prompt's input ids (1 x n), through the model's chat template when `chat` is set."""
        if chat:
            if not getattr(self.tokenizer, "chat_template", None):
                raise TaskFailed(
                    FailureReason.INPUT, f"{self.name}: chat asked for, but it has no chat template"
                )
            turns = prompt.messages or (ChatMessage(role="user", content=prompt.text),)
            messages = [{"role": m.role, "content": m.content} for m in turns]
            encoded = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            return encoded["input_ids"].to(self.device)
        return self.tokenizer(prompt.text, return_tensors="pt")["input_ids"].to(self.device)

    def generate(self, prompt: Prompt, spec: GenerateSpec) -> RequestRecord:
        """One greedy request, every output token timed from the `generate` call.

        Raises:
            TaskFailed: INPUT when the prompt plus `max_new_tokens` exceed the model's context.
        """
        import torch

        from drivers.runtimes.llmclock import TokenClock

        ids = self.encode(prompt, spec.chat)
        n_prompt = int(ids.shape[1])
        context = self.context_length()
        max_new = prompt.output_tokens or spec.max_new_tokens
        if context is not None and n_prompt + max_new > context:
            raise TaskFailed(
                FailureReason.INPUT,
                f"prompt {prompt.id}: {n_prompt} prompt tokens + max_new_tokens {max_new} "
                f"exceed {self.name}'s context of {context} tokens",
            )
        pad = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id
        )
        extra = {"min_new_tokens": max_new} if spec.ignore_eos else {}
        clock = TokenClock(time.perf_counter_ns())
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new,
                do_sample=False,
                streamer=clock,
                pad_token_id=pad,
                **extra,
            )
        _synchronize(self.device)
        end_ns = time.perf_counter_ns()
        new = out[0, n_prompt:]
        times = tuple((t - clock.start_ns) / NS_PER_MS for t in clock.token_ns)
        return RequestRecord(
            prompt_id=prompt.id,
            prompt_tokens=n_prompt,
            output_tokens=int(new.shape[0]),
            ttft_ms=times[0] if times else None,
            ttfo_ms=times[0] if times else None,  # the model's own tokens: no reasoning channel apart
            chunks=len(times),
            counted_tokens=int(new.shape[0]),
            token_source=f"tokenizer:{self.name}",  # the harness adds the model's digest (its revision)
            input_tokens_asked=prompt.input_tokens,
            output_tokens_asked=prompt.output_tokens,
            dataset_seed=spec.dataset_seed,
            e2e_ms=times[-1] if times else (end_ns - clock.start_ns) / NS_PER_MS,
            token_times_ms=times,
            output_text=self.tokenizer.decode(new, skip_special_tokens=True),
            tokens_counted=True,
        )


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()
